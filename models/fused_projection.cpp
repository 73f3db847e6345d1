// models/fused_projection.h: several Linear layers as one product.
#include "models/fused_projection.h"

#include "kernels/few_rows_linear.h"

namespace fwlab {

std::vector<FusedProjection::Stamp> FusedProjection::stamps(const std::vector<torch::nn::Linear>& layers) {
  std::vector<Stamp> out;
  for (const auto& layer : layers)
    for (const auto* t : {&layer->weight, &layer->bias}) {
      if (!t->defined()) {
        out.push_back({});
        continue;
      }
      out.push_back({t->unsafeGetTensorImpl(), t->data_ptr(), static_cast<int64_t>(t->scalar_type()), t->_version()});
    }
  return out;
}

std::pair<torch::Tensor, torch::Tensor> FusedProjection::concatenated(const std::vector<torch::nn::Linear>& layers) {
  std::vector<torch::Tensor> weights, biases;
  bool any_bias = false;
  for (const auto& layer : layers) {
    weights.push_back(layer->weight);
    any_bias = any_bias || layer->bias.defined();
  }
  if (any_bias)
    for (const auto& layer : layers)
      biases.push_back(layer->bias.defined() ? layer->bias
                                             : torch::zeros({layer->weight.size(0)}, layer->weight.options()));
  return {torch::cat(weights, 0), any_bias ? torch::cat(biases, 0) : torch::Tensor()};
}

std::vector<torch::Tensor> FusedProjection::operator()(const torch::Tensor& x,
                                                       const std::vector<torch::nn::Linear>& layers) {
  TORCH_CHECK(!layers.empty(), "FusedProjection needs at least one layer");
  if (layers.size() == 1) return {kernels::few_rows_linear(x, layers[0]->weight, layers[0]->bias)};
  torch::Tensor weight, bias;
  bool wants_grad = false;
  for (const auto& layer : layers)
    wants_grad = wants_grad || layer->weight.requires_grad() || (layer->bias.defined() && layer->bias.requires_grad());
  if (torch::GradMode::is_enabled() && wants_grad) {
    std::tie(weight, bias) = concatenated(layers);
    cached_stamps_.clear(), cached_weight_ = cached_bias_ = torch::Tensor();  // training: no second copy kept
  } else {
    auto now = stamps(layers);
    if (!(now == cached_stamps_)) {
      torch::NoGradGuard guard;
      std::tie(cached_weight_, cached_bias_) = concatenated(layers);
      cached_stamps_ = std::move(now);
    }
    weight = cached_weight_, bias = cached_bias_;
  }
  std::vector<int64_t> widths;
  for (const auto& layer : layers) widths.push_back(layer->weight.size(0));
  return kernels::few_rows_linear(x, weight, bias).split_with_sizes(widths, -1);
}

}  // namespace fwlab

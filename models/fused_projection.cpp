// models/fused_projection.h: several Linear layers as one product.
#include "models/fused_projection.h"

#include "kernels/few_rows_linear.h"

namespace fwlab {

bool FusedProjection::Stamp::operator==(const Stamp& other) const {
  const bool same_storage = storage.has_value() == other.storage.has_value() &&
                            (!storage || (!storage->expired() && !other.storage->expired() &&
                                          storage->_unsafe_get_target() == other.storage->_unsafe_get_target()));
  return impl == other.impl && same_storage && data == other.data && dtype == other.dtype && device == other.device &&
         version == other.version;
}

std::vector<FusedProjection::Stamp> FusedProjection::stamps(const std::vector<torch::nn::Linear>& layers) {
  std::vector<Stamp> out;
  for (const auto& layer : layers)
    for (const auto* t : {&layer->weight, &layer->bias}) {
      Stamp s;
      if (t->defined()) {
        s.impl = t->unsafeGetTensorImpl(), s.storage = t->storage().getWeakStorageImpl(), s.data = t->data_ptr();
        s.dtype = static_cast<int64_t>(t->scalar_type()), s.version = static_cast<int64_t>(t->_version());
        s.device = static_cast<int64_t>(t->device().type()) * 1024 + t->device().index();
      }
      out.push_back(std::move(s));
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

namespace {
thread_local std::vector<torch::Tensor>* graph_pins = nullptr;
}  // namespace

void FusedProjection::pin_kept_into(std::vector<torch::Tensor>* pins) { graph_pins = pins; }

std::pair<torch::Tensor, torch::Tensor> FusedProjection::kept(const std::vector<torch::nn::Linear>& layers) {
  const std::lock_guard<std::mutex> lock(mutex_);
  auto now = stamps(layers);
  if (!(now == cached_stamps_)) {
    // Ordinary tensors even inside a caller's inference mode: a later call with gradients may save them.
    const c10::InferenceMode not_inference(false);
    const torch::NoGradGuard no_grad;
    std::tie(cached_weight_, cached_bias_) = concatenated(layers);
    cached_stamps_ = std::move(now);
  }
  if (graph_pins)
    for (const auto& t : {cached_weight_, cached_bias_})
      if (t.defined()) graph_pins->push_back(t);
  return {cached_weight_, cached_bias_};
}

void FusedProjection::drop_kept() {
  const std::lock_guard<std::mutex> lock(mutex_);
  cached_stamps_.clear(), cached_weight_ = cached_bias_ = torch::Tensor();
}

std::vector<torch::Tensor> FusedProjection::operator()(const torch::Tensor& x,
                                                       const std::vector<torch::nn::Linear>& layers, bool step) {
  TORCH_CHECK(!layers.empty(), "FusedProjection needs at least one layer");
  if (layers.size() == 1) return {kernels::few_rows_linear(x, layers[0]->weight, layers[0]->bias)};
  bool wants_grad = false;
  for (const auto& layer : layers)
    wants_grad = wants_grad || layer->weight.requires_grad() || (layer->bias.defined() && layer->bias.requires_grad());
  const bool recording = torch::GradMode::is_enabled() && wants_grad;
  if (recording) drop_kept();  // training: no second copy of the weights beside them
  const auto [weight, bias] = step && !recording ? kept(layers) : concatenated(layers);
  std::vector<int64_t> widths;
  for (const auto& layer : layers) widths.push_back(layer->weight.size(0));
  return kernels::few_rows_linear(x, weight, bias).split_with_sizes(widths, -1);
}

}  // namespace fwlab

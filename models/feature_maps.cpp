#include "models/feature_maps.h"

#include <cmath>

namespace fwlab {

FeatureMap::FeatureMap(const MixerSpec& spec, int64_t n_heads, int64_t head_dim)
    : kind_(spec.feature_map), nu_(spec.dpfp_nu) {
  const int64_t m = spec.m;
  if (is_projection()) {
    // torch.nn.Linear's default initialisation, as the reference (PyTorch) implementations get it.
    const double bound = 1.0 / std::sqrt(static_cast<double>(head_dim));
    weight = register_parameter("weight", torch::empty({n_heads, m, head_dim}).uniform_(-bound, bound));
    if (kind_ == "relu") bias = register_parameter("bias", torch::empty({n_heads, m}).uniform_(-bound, bound));
    query_scale_ = 1.0 / std::sqrt(static_cast<double>(head_dim));
  } else if (kind_ == "rfa") {
    log_sigma = register_parameter("log_sigma", torch::zeros({n_heads}));
    omega = register_buffer("omega", torch::randn({n_heads, m / 2, head_dim}));
  } else if (kind_ == "hedgehog") {
    // Hedgehog (Zhang et al. 2024) as LoLCATs uses it: separate query and key maps without bias, initialised to
    // the identity (rectangular where m/2 != head_dim), and no query scaling (the maps learn the temperature).
    auto eye = torch::eye(m / 2, head_dim).unsqueeze(0).repeat({n_heads, 1, 1});
    weight_q = register_parameter("weight_q", eye.clone());
    weight_k = register_parameter("weight_k", eye.clone());
  }
}

void FeatureMap::resample() {
  if (omega.defined()) {
    torch::NoGradGuard guard;
    omega.normal_();
  }
}

torch::Tensor FeatureMap::project(const torch::Tensor& x) const {
  const bool step = x.dim() == 3;
  auto xs = step ? x.unsqueeze(-2) : x;  // [B, H, T, hd]
  auto y = torch::matmul(xs, weight.transpose(-1, -2));
  if (bias.defined()) y = y + bias.unsqueeze(1);
  return step ? y.squeeze(-2) : y;
}

torch::Tensor FeatureMap::activate(const torch::Tensor& projected) const {
  return kind_ == "relu" ? torch::relu(projected) : projected;
}

torch::Tensor FeatureMap::forward(const torch::Tensor& x, bool is_query) {
  if (is_projection()) return activate(project(is_query ? x * query_scale_ : x));
  if (kind_ == "elu1") return torch::elu(x) + 1;
  if (kind_ == "hedgehog") {  // [softmax(W x), softmax(-W x)] over the features, per head: positive, sums to 2
    const bool step = x.dim() == 3;
    auto p = torch::matmul(step ? x.unsqueeze(-2) : x, (is_query ? weight_q : weight_k).transpose(-1, -2));
    auto phi = torch::cat({torch::softmax(p, -1), torch::softmax(-p, -1)}, -1);
    return step ? phi.squeeze(-2) : phi;
  }
  if (kind_ == "dpfp") {
    auto r = torch::cat({torch::relu(x), torch::relu(-x)}, -1);
    std::vector<torch::Tensor> parts;
    for (int64_t i = 1; i <= nu_; ++i) parts.push_back(r * torch::roll(r, {i}, {-1}));
    return torch::cat(parts, -1);
  }
  // rfa: phi(x) = [sin(W x^), cos(W x^)] / sqrt(k), x^ = x / |x|, W = sigma * omega, omega ~ N(0, 1).
  const bool step = x.dim() == 3;
  auto xs = step ? x.unsqueeze(-2) : x;
  auto unit = xs / xs.norm(2, -1, true).clamp_min(1e-12);
  auto w = omega * log_sigma.exp().view({-1, 1, 1});
  auto proj = torch::matmul(unit, w.transpose(-1, -2));
  auto phi = torch::cat({torch::sin(proj), torch::cos(proj)}, -1) / std::sqrt(static_cast<double>(omega.size(1)));
  return step ? phi.squeeze(-2) : phi;
}

}  // namespace fwlab

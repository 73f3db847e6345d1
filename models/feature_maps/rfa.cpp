// φ(x) = [sin(W x̂), cos(W x̂)] / √(m/2), x̂ = x / |x|, W = σ·ω, ω ~ N(0, 1) redrawn each training forward, with a
// learned log σ per head.
#include "models/feature_maps/rfa.h"

#include <cmath>

namespace fwlab {

namespace {

class RfaMap : public FeatureMap {
 public:
  RfaMap(int64_t n_heads, int64_t m, int64_t head_dim) {
    log_sigma_ = register_parameter("log_sigma", torch::zeros({n_heads}));
    omega_ = register_buffer("omega", torch::randn({n_heads, m / 2, head_dim}));
  }
  void resample() override {
    torch::NoGradGuard guard;
    omega_.normal_();
  }
  torch::Tensor forward(const torch::Tensor& x, bool) override {
    auto unit = x / x.norm(2, -1, true).clamp_min(1e-12);
    auto proj = project_heads(unit, omega_ * log_sigma_.exp().view({-1, 1, 1}));
    return torch::cat({torch::sin(proj), torch::cos(proj)}, -1) / std::sqrt(static_cast<double>(omega_.size(1)));
  }

 private:
  torch::Tensor log_sigma_, omega_;
};

}  // namespace

std::shared_ptr<FeatureMap> make_rfa_map(const MixerSpec& spec, int64_t n_heads, int64_t head_dim) {
  return std::make_shared<RfaMap>(n_heads, spec.m, head_dim);
}

}  // namespace fwlab

// φ(x) = s·[sin(W x̂), cos(W x̂)], x̂ = x / |x|, W = σ·ω, ω ~ N(0, 1) redrawn each training forward, with a
// learned log σ per head. The scale s sets where the attention normalization's floor bites: random features
// make φ(q)·z an estimate that can be near zero or negative, and the floor (1e-2, models/rules/kernel_families.h)
// then multiplies a read by up to 100 — a 2-feature causal RFA never trained. Peng et al.'s code (haopeng-uw/RFA,
// utils: SCALE = 0.1 on φ, the sum clamped at EPS = 0.1) floors Σ_j Σ_i cos(·) at 10; s = √(1e-2 / 10) puts
// fwlab's floor at the same place. Where the floor does not bite, s cancels between the read and its normaliser.
#include "models/feature_maps/rfa.h"

#include <cmath>

namespace fwlab {

namespace {

const double kScale = std::sqrt(1e-3);

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
    return torch::cat({torch::sin(proj), torch::cos(proj)}, -1) * kScale;
  }

 private:
  torch::Tensor log_sigma_, omega_;
};

}  // namespace

std::shared_ptr<FeatureMap> make_rfa_map(const MixerSpec& spec, int64_t n_heads, int64_t head_dim) {
  return std::make_shared<RfaMap>(n_heads, spec.m, head_dim);
}

}  // namespace fwlab

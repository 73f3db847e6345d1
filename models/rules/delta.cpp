// The delta rule (Schlag et al. 2021): S_t = S_{t-1} + β_t (v_t - S_{t-1} φ'(k_t)) φ'(k_t)ᵀ, β_t = σ(w_β·x_t + b_β)
// per head; φ' the sum-normalised map, or the L2-normalised one with key_norm = "l2" (DeltaNet).
#include "models/rules/delta.h"

#include <cmath>

#include "models/rules/kernel_families.h"

namespace fwlab {

namespace {

// Mao (sec. 4, footnote 3) initialises the delta rule's write strength near 0.007.
constexpr double kDeltaBetaInit = 0.007;

class DeltaRule : public UpdateRule {
 public:
  DeltaRule(torch::nn::Module& layer, const MixerSpec& spec, const ModelConfig& cfg)
      : UpdateRule(spec), n_heads_(cfg.n_heads) {
    gate_ = layer.register_module("gate", torch::nn::Linear(cfg.d_model, cfg.n_heads));
    torch::NoGradGuard guard;
    const double beta0 = spec.beta_init > 0 ? spec.beta_init : kDeltaBetaInit;
    gate_->bias.fill_(std::log(beta0 / (1.0 - beta0)));
  }
  std::vector<torch::nn::Linear> gate_projections() const override { return {gate_}; }
  void prepare(RuleInputs& in, const std::vector<torch::Tensor>& gates) override {
    normalize_keys(in, key_norm_);
    in.beta = torch::sigmoid(split_heads(gates[0], n_heads_));  // [B, H, T, 1]
  }
  kernels::RecurrenceResult recur(const RuleInputs& in, const RuleRun& run) const override {
    return recur_delta_family(in, run);
  }
  torch::Tensor value_coefficients(const RuleInputs& in, bool attn_norm) const override {
    return delta_family_coefficients(in, attn_norm);
  }

 private:
  torch::nn::Linear gate_{nullptr};
  int64_t n_heads_;
};

}  // namespace

std::unique_ptr<UpdateRule> make_delta_rule(torch::nn::Module& layer, const MixerSpec& spec, const ModelConfig& cfg) {
  return std::make_unique<DeltaRule>(layer, spec, cfg);
}

}  // namespace fwlab

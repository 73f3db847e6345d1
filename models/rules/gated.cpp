// The gated rule (Mao 2022, eq. 5): S_t = g_t S_{t-1} + (1 - g_t) v_t φ(k_t)ᵀ, g_t = σ(w_g·x_t + b_g) per head.
#include "models/rules/gated.h"

#include "models/rules/kernel_families.h"

namespace fwlab {

namespace {

class GatedRule : public UpdateRule {
 public:
  GatedRule(torch::nn::Module& layer, const MixerSpec& spec, const ModelConfig& cfg)
      : UpdateRule(spec), n_heads_(cfg.n_heads) {
    gate_ = layer.register_module("gate", torch::nn::Linear(cfg.d_model, cfg.n_heads));
    // NOTES gives no initialisation for the gated rule's bias; we use the UGI of the decay rule's gates. The
    // weights keep torch.nn.Linear's default initialisation.
    uniform_gate_init(gate_->bias, spec.gate_init);
  }
  std::vector<torch::nn::Linear> gate_projections() const override { return {gate_}; }
  void prepare(RuleInputs& in, const std::vector<torch::Tensor>& gates) override {
    const auto g_logit =
        kernels::widened_to_fp32(split_heads(gates[0], n_heads_));  // [B, H, T, 1]; gates in fp32 under mixed precision
    in.log_a = torch::log_sigmoid(g_logit);
    in.write = torch::sigmoid(-g_logit);  // (1 - g_t) v_t
  }
  kernels::RecurrenceResult recur(const RuleInputs& in, const RuleRun& run) const override {
    return recur_decay_family(in, run);
  }
  torch::Tensor value_coefficients(const RuleInputs& in, bool attn_norm) const override {
    return decay_family_coefficients(in, attn_norm);
  }

 private:
  torch::nn::Linear gate_{nullptr};
  int64_t n_heads_;
};

}  // namespace

std::unique_ptr<UpdateRule> make_gated_rule(torch::nn::Module& layer, const MixerSpec& spec, const ModelConfig& cfg) {
  return std::make_unique<GatedRule>(layer, spec, cfg);
}

}  // namespace fwlab

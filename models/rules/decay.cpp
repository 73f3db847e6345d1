// Mao's decay rule (2022, sec. 3): S_t = (z_t f_tᵀ) ⊙ S_{t-1} + v_t φ(k_t)ᵀ, z_t = σ(W_z x_t + b_z) ∈ (0,1)^hd,
// f_t = σ(W_f x_t + b_f) ∈ (0,1)^m.
#include "models/rules/decay.h"

#include "models/rules/kernel_families.h"

namespace fwlab {

namespace {

class DecayRule : public UpdateRule {
 public:
  DecayRule(torch::nn::Module& layer, const MixerSpec& spec, const ModelConfig& cfg)
      : UpdateRule(spec), n_heads_(cfg.n_heads) {
    decay_z_ = layer.register_module("decay_z", torch::nn::Linear(cfg.d_model, cfg.n_heads * cfg.head_dim));
    decay_f_ = layer.register_module("decay_f", torch::nn::Linear(cfg.d_model, cfg.n_heads * spec.m));
    uniform_gate_init(decay_z_->bias, spec.gate_init);
    uniform_gate_init(decay_f_->bias, spec.gate_init);
  }
  std::vector<torch::nn::Linear> gate_projections() const override { return {decay_z_, decay_f_}; }
  void prepare(RuleInputs& in, const std::vector<torch::Tensor>& gates) override {
    namespace K = kernels;  // gates in fp32 under mixed precision
    in.log_a = torch::log_sigmoid(K::widened_to_fp32(split_heads(gates[0], n_heads_)));
    in.log_b = torch::log_sigmoid(K::widened_to_fp32(split_heads(gates[1], n_heads_)));
  }
  kernels::RecurrenceResult recur(const RuleInputs& in, const RuleRun& run) const override {
    return recur_decay_family(in, run);
  }
  torch::Tensor value_coefficients(const RuleInputs& in, bool attn_norm) const override {
    return decay_family_coefficients(in, attn_norm);
  }
  // Mao (sec. 3): W_v and b_v scaled by 1 - σ(b_z) per value dimension.
  torch::Tensor value_rescale(int64_t, const torch::TensorOptions&) const override {
    return 1.0 - torch::sigmoid(decay_z_->bias.detach());
  }
  std::string rescale_reason() const override { return "x (1 - sigmoid(b_z)) per value dimension (decay rule, UGI)"; }

 private:
  torch::nn::Linear decay_z_{nullptr}, decay_f_{nullptr};
  int64_t n_heads_;
};

}  // namespace

std::unique_ptr<UpdateRule> make_decay_rule(torch::nn::Module& layer, const MixerSpec& spec, const ModelConfig& cfg) {
  return std::make_unique<DecayRule>(layer, spec, cfg);
}

}  // namespace fwlab

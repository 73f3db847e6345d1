// The gated delta rule (Yang, Kautz & Hatamizadeh 2024, "Gated Delta Networks"), as flash-linear-attention's
// GatedDeltaNet layer computes it:
//   S_t = α_t S_{t-1} (I - β_t k_t k_tᵀ) + β_t v_t k_tᵀ,   y_t = S_t q_t
// with q and k the feature map's outputs L2-normalised per head (q then scaled by m^-1/2), β_t = σ(W_β x_t) and
// α_t = exp(-exp(A_log) · softplus(W_α x_t + dt_bias)). The paper's recurrence asks only for a data-dependent
// α_t ∈ (0, 1) and takes Mamba-2's gate for it; the exact form above (the softplus, dt_bias, A_log per head) is
// our reading of its code (flash-linear-attention), a choice stated here.
// The fla layer's other parts are the fast-weight layer's, asked for by name: its short convolution (conv = 4,
// models/short_conv.h) and output RMSNorm (out_norm = "rmsnorm"); not built: the SiLU output gate of fla's default
// use_gate = True (Zoology's MQAR runs switch it off), and grouped value heads (GVA).
#include "models/rules/gated_delta.h"

#include <cmath>

#include "models/rules/kernel_families.h"

namespace fwlab {

namespace {

// fla's initialisation (modeling_gated_deltanet _init_weights and the layer): A ~ U(0, 16), A_log = ln A;
// dt = exp(U(ln 1e-3, ln 0.1)) floored at 1e-4, dt_bias = the inverse softplus of dt.
constexpr double kAMax = 16.0, kDtMin = 1e-3, kDtMax = 0.1, kDtFloor = 1e-4;
// A = 0 exactly would make A_log = -inf: a floor far below where it matters (α = 1 to fp32 precision).
constexpr double kAFloor = 1e-6;

class GatedDeltaRule : public UpdateRule {
 public:
  GatedDeltaRule(torch::nn::Module& layer, const MixerSpec& spec, const ModelConfig& cfg)
      : UpdateRule(spec), n_heads_(cfg.n_heads) {
    // No bias on the gate projections (fla); their weights keep torch.nn.Linear's default initialisation, as
    // every new projection in fwlab does.
    a_proj_ = layer.register_module("a_proj",
                                    torch::nn::Linear(torch::nn::LinearOptions(cfg.d_model, cfg.n_heads).bias(false)));
    b_proj_ = layer.register_module("b_proj",
                                    torch::nn::Linear(torch::nn::LinearOptions(cfg.d_model, cfg.n_heads).bias(false)));
    torch::NoGradGuard guard;
    auto A = torch::empty({cfg.n_heads}).uniform_(0.0, kAMax).clamp_min(kAFloor);
    A_log_ = layer.register_parameter("A_log", torch::log(A));
    auto dt = torch::exp(torch::empty({cfg.n_heads}).uniform_(std::log(kDtMin), std::log(kDtMax))).clamp_min(kDtFloor);
    dt_bias_ = layer.register_parameter("dt_bias", dt + torch::log(-torch::expm1(-dt)));
  }
  // fla's order of the gate projections: α's (a_proj), then β's (b_proj).
  std::vector<torch::nn::Linear> gate_projections() const override { return {a_proj_, b_proj_}; }
  void prepare(RuleInputs& in, const std::vector<torch::Tensor>& gates) override {
    namespace K = kernels;  // gates in fp32 under mixed precision
    normalize_keys(in, key_norm_);
    in.beta = torch::sigmoid(K::widened_to_fp32(split_heads(gates[1], n_heads_)));  // [B, H, T, 1]
    const auto dt = torch::softplus(K::widened_to_fp32(gates[0] + dt_bias_));       // [B, T, H]
    in.alpha = torch::exp(split_heads(-torch::exp(A_log_) * dt, n_heads_));         // [B, H, T, 1]
  }
  kernels::RecurrenceResult recur(const RuleInputs& in, const RuleRun& run) const override {
    return recur_delta_family(in, run);
  }
  torch::Tensor value_coefficients(const RuleInputs& in, bool attn_norm) const override {
    return delta_family_coefficients(in, attn_norm);
  }

 private:
  torch::nn::Linear a_proj_{nullptr}, b_proj_{nullptr};
  torch::Tensor A_log_, dt_bias_;
  int64_t n_heads_;
};

}  // namespace

std::unique_ptr<UpdateRule> make_gated_delta_rule(torch::nn::Module& layer, const MixerSpec& spec,
                                                  const ModelConfig& cfg) {
  return std::make_unique<GatedDeltaRule>(layer, spec, cfg);
}

}  // namespace fwlab

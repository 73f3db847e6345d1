// The delta family: delta and gated_delta (models/rules/kernel_families.h).
#include <cmath>

#include "kernels/delta/form_race.h"
#include "kernels/delta/delta.h"
#include "models/rules/kernel_families.h"

namespace fwlab {

namespace {

// Sum normalization (Schlag et al.) divides by the feature sum. The small constant only keeps an all-zero ReLU
// feature vector at 0 instead of NaN; a signed map can still drive the sum to ~0, which is the documented
// instability of "delta without feature map" that the tables must be able to show.
constexpr double kSumNormEps = 1e-6;
constexpr double kL2NormEps = 1e-6;

torch::Tensor sum_normalize(const torch::Tensor& phi_in) {
  const auto phi = kernels::widened_to_fp32(phi_in);
  return phi / (phi.sum(-1, true) + kSumNormEps);
}

torch::Tensor l2_normalize(const torch::Tensor& x_in) {
  const auto x = kernels::widened_to_fp32(x_in);
  return x / torch::sqrt((x * x).sum(-1, true) + kL2NormEps);
}

kernels::RecurrenceResult run_kernel(const RuleInputs& in, const torch::Tensor& values, const torch::Tensor& S0,
                                     bool reference) {
  namespace K = kernels;
  // Not the reference: the fused kernel or the chunked form, whichever measured faster for this shape class.
  if (!reference) return K::delta_family_recurrence(in.fq, in.fk, values, in.alpha, in.beta, S0);
  return in.alpha.defined() ? K::gated_delta_recurrence_naive(in.fq, in.fk, values, in.alpha, in.beta, S0)
                            : K::delta_recurrence_naive(in.fq, in.fk, values, in.beta, S0);
}

// The additive normaliser z_t = z_{t-1} + φ'(k_t) read by each query, [B, H, T, 1]; the step form continues from
// and updates state->z.
torch::Tensor additive_normaliser(const RuleInputs& in, MixerState* state) {
  TORCH_CHECK(!in.alpha.defined(), "attention normalization is defined for the delta rule without decay only");
  auto z = in.fk.cumsum(2);
  if (state && state->z.defined()) z = z + state->z.unsqueeze(2);
  if (state) state->z = z.select(2, z.size(2) - 1);
  return (z * in.fq).sum(-1, true);
}

}  // namespace

void normalize_keys(RuleInputs& in, const std::string& key_norm) {
  if (key_norm == "sum") {
    in.fq = sum_normalize(in.fq);
    in.fk = sum_normalize(in.fk);
    return;
  }
  TORCH_CHECK(key_norm == "l2", "unknown key normalization '", key_norm, "'");
  in.fq = l2_normalize(in.fq) / std::sqrt(static_cast<double>(in.fq.size(-1)));
  in.fk = l2_normalize(in.fk);
}

kernels::RecurrenceResult recur_delta_family(const RuleInputs& in, const RuleRun& run) {
  auto r = run_kernel(in, in.v, run.state ? run.state->S : torch::Tensor(), run.reference);
  if (run.attn_norm) r.y = r.y / additive_normaliser(in, run.state).clamp_min(kAttnNormFloor);
  return r;
}

torch::Tensor delta_family_coefficients(const RuleInputs& in, bool attn_norm) {
  // y is linear in the values: the coefficient of v_s in y_t is what the layer's own recurrence returns when
  // position s writes the one-hot value e_s (the overwrites have no closed form as short as this).
  const int64_t B = in.fq.size(0), H = in.fq.size(1), T = in.fq.size(2);
  const auto probe = torch::eye(T, in.fq.options()).expand({B, H, T, T}).contiguous();
  auto c = run_kernel(in, probe, {}, true).y.unsqueeze(2);
  if (attn_norm) c = c / additive_normaliser(in, nullptr).unsqueeze(2).clamp_min(kAttnNormFloor);
  return c;
}

}  // namespace fwlab

// The two recurrence kernel families the update rules run (contract/model/rule_table.h, KernelFamily): each has a
// parallel and step form (recur) and the coefficients the attention analysis reads.
#pragma once

#include "models/rules/update_rule.h"

namespace fwlab {

// T2R clamps the attention-normalization denominator from below at 1e-2 (NOTES.md).
inline constexpr double kAttnNormFloor = 1e-2;

// S_t = diag(a_t) S_{t-1} diag(b_t) + w_t v_t k_tᵀ from in.log_a, in.log_b and in.write (each optional). With
// attention normalization the normaliser z follows the same recurrence as S with a value of 1, so it rides along
// as an extra value row (the gated rule: z_t = g_t z_{t-1} + (1 - g_t) φ(k_t)).
kernels::RecurrenceResult recur_decay_family(const RuleInputs& in, const RuleRun& run);
torch::Tensor decay_family_coefficients(const RuleInputs& in, bool attn_norm);

// S_t = α_t S_{t-1} (I - β_t k_t k_tᵀ) + β_t v_t k_tᵀ from in.beta and in.alpha (undefined: α = 1, the delta
// rule). With attention normalization the normaliser is additive, z_t = z_{t-1} + φ'(k_t) (delta rule only).
kernels::RecurrenceResult recur_delta_family(const RuleInputs& in, const RuleRun& run);
torch::Tensor delta_family_coefficients(const RuleInputs& in, bool attn_norm);

// The delta family's key normalizations of in.fq and in.fk: "sum", φ/(Σφ + 1e-6) (Schlag et al. 2021), or
// "l2", x/√(Σx² + 1e-6) with the query then scaled by m^-1/2 (flash-linear-attention's DeltaNet and Gated
// DeltaNet: the epsilon inside the root as its l2norm, the scale after the norm). In fp32 under mixed precision.
void normalize_keys(RuleInputs& in, const std::string& key_norm);

}  // namespace fwlab

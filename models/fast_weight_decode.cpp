// The CPU decode step of a plain decay layer (kernels/decay/decode_step.h): the projections as two products of few
// rows (kernels/few_rows_linear.h; q, k, v and both gates are one, models/fused_projection.h), the features, gates,
// state and read in one loop. Anything the loop does not hold (another rule or map, a normaliser, a window, a
// convolution, rotary positions, grouped heads, adapters, an output norm, folding, gradients, another device or
// dtype, autocast) takes the general path.
#include "kernels/decay/decode_step.h"
#include "kernels/few_rows_linear.h"
#include "models/mixers.h"
#include "models/rules/update_rule.h"

namespace fwlab {

namespace {

bool same_dtype(const torch::Tensor& x, const torch::Tensor& w) {
  return !w.defined() || w.scalar_type() == x.scalar_type();
}

}  // namespace

std::optional<torch::Tensor> FastWeight::decode_step(const torch::Tensor& x, MixerState& state) {
  // The decay rule: the decay family's one rule with two gate projections (value side z, key side f).
  const auto gates = rule->gate_projections();
  const bool decay = rule->row().family == KernelFamily::decay && gates.size() == 2;
  const auto* map = projection_map();
  const bool plain = decay && map && spec.norm == "none" && spec.swa_window == 0 && !conv && !out_norm.defined() &&
                     !qkv_lora && !o_lora && !positions_or_groups() && !folded() && !reference_kernels_;
  const auto dtype = x.scalar_type();
  if (!plain || is_training() || torch::GradMode::is_enabled() || !x.is_cpu() ||
      (dtype != torch::kFloat32 && dtype != torch::kFloat64) || !same_dtype(x, qkv->weight) ||
      !same_dtype(x, map->weight) || !same_dtype(x, gates[0]->weight) || !same_dtype(x, state.S))
    return std::nullopt;
  const auto contiguous = [](const torch::Tensor& t) { return t.defined() ? t.contiguous() : t; };
  kernels::DecayDecodeInputs in;
  const auto products = fused_(x, {qkv, gates[0], gates[1]}, true);  // one pass over the token's weights
  if (products[0].scalar_type() != dtype) return std::nullopt;       // autocast's lower precision: the general path
  in.qkv = products[0].contiguous(), in.z = products[1].contiguous(), in.f = products[2].contiguous();
  in.phi_w = contiguous(map->weight), in.phi_b = contiguous(map->bias);
  in.query_scale = map->query_scale(), in.relu = map->relu();
  in.S = contiguous(state.S);
  auto r = kernels::decay_decode_step(in);
  state.S = r.S;
  record_state(r.S);
  return kernels::few_rows_linear(r.y, o->weight, o->bias);
}

}  // namespace fwlab

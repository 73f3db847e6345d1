// Fast-weight mixers (NOTES.md, "Update rules"). Shapes: B batch, T time, H heads, hd head dim, m features. The
// rule (models/rules/) and the feature map (models/feature_maps/) come from their registries; this file holds
// what every fast-weight layer shares: projections, the feature map, normalization, the sliding window, folding.
#include <algorithm>
#include <cmath>

#include "contract/rule_table.h"
#include "models/mixers.h"
#include "models/rules/kernel_families.h"

namespace fwlab {

namespace {

// Chunk length of the parallel form: the spec's, or the rule's default (contract/rule_table.cpp).
int64_t chunk_of(const MixerSpec& spec) { return spec.chunk > 0 ? spec.chunk : find_rule(spec.rule)->default_chunk; }

// Softmax attention of q over the last `window` keys, [B, H, T, hd]. With a state, the keys and values of up to
// window - 1 earlier tokens come from it and it keeps the last `window` after: the step form's O(window) cache.
torch::Tensor window_softmax(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t window, MixerState* state) {
  auto keys = k, values = v;
  if (state && state->k.defined()) keys = torch::cat({state->k, k}, 2), values = torch::cat({state->v, v}, 2);
  const int64_t L = keys.size(2);
  if (state) {
    const int64_t keep = std::min(L, window);
    state->k = keys.narrow(2, L - keep, keep).contiguous(), state->v = values.narrow(2, L - keep, keep).contiguous();
  }
  return torch::matmul(softmax_weights(q, keys, window), values);
}

}  // namespace

FastWeight::FastWeight(const MixerSpec& s, const ModelConfig& cfg)
    : spec(s), n_heads_(cfg.n_heads), head_dim_(cfg.head_dim) {
  const int64_t d = cfg.d_model, inner = cfg.n_heads * cfg.head_dim;
  qkv = register_module("qkv", torch::nn::Linear(d, 3 * inner));
  o = register_module("o", torch::nn::Linear(inner, d));
  init_gpt2_linear(qkv);
  init_gpt2_linear(o, 0.02 / std::sqrt(2.0 * static_cast<double>(cfg.n_layers)));
  phi = register_module("phi", make_feature_map(s, cfg.n_heads, cfg.head_dim));
  rule = make_rule(*this, s, cfg);  // registers the rule's parameters on this layer
  resid_drop = register_module("resid_drop", Dropout(cfg.dropout));
  apply_value_rescale();
  add_lora(*this, cfg, qkv_lora, o_lora);  // last: a model without LoRA draws the same initial weights as before
}

torch::Tensor FastWeight::value_rescale() const { return rule->value_rescale(n_heads_ * head_dim_, qkv->weight.options()); }

void FastWeight::apply_value_rescale() {
  auto factor = value_rescale();
  if (!factor.defined()) return;
  torch::NoGradGuard guard;
  const int64_t inner = n_heads_ * head_dim_;
  qkv->weight.narrow(0, 2 * inner, inner).mul_(factor.unsqueeze(1));
  qkv->bias.narrow(0, 2 * inner, inner).mul_(factor);
}

const ProjectionMap* FastWeight::projection_map() const { return dynamic_cast<const ProjectionMap*>(phi.get()); }

void FastWeight::fold_feature_map() {
  const auto* map = projection_map();
  TORCH_CHECK(map, "only projection feature maps (relu, identity) can be folded, not ", spec.feature_map);
  TORCH_CHECK(!qkv_lora, "merge the LoRA adapters (merge_lora) before folding the feature map");
  TORCH_CHECK(spec.swa_window == 0, "a layer with a sliding window reads q and k themselves: its feature map cannot be folded");
  TORCH_CHECK(!folded(), "feature map already folded");
  torch::NoGradGuard guard;
  const int64_t d = qkv->weight.size(1), inner = n_heads_ * head_dim_, m = spec.m;
  auto fold = [&](int64_t block, double scale) {
    auto w = qkv->weight.narrow(0, block * inner, inner).view({n_heads_, head_dim_, d}) * scale;
    auto b = qkv->bias.narrow(0, block * inner, inner).view({n_heads_, head_dim_, 1}) * scale;
    auto w_folded = torch::matmul(map->weight, w);                // [H, m, d]
    auto b_folded = torch::matmul(map->weight, b).squeeze(-1);    // [H, m]
    if (map->bias.defined()) b_folded = b_folded + map->bias;
    return std::make_pair(w_folded.reshape({n_heads_ * m, d}), b_folded.reshape({n_heads_ * m}));
  };
  auto [wq, bq] = fold(0, map->query_scale());
  auto [wk, bk] = fold(1, 1.0);
  folded_qk = register_module("folded_qk", torch::nn::Linear(d, 2 * n_heads_ * m));
  folded_qk->to(qkv->weight.device(), qkv->weight.scalar_type());
  folded_qk->weight.copy_(torch::cat({wq, wk}, 0));
  folded_qk->bias.copy_(torch::cat({bq, bk}, 0));
}

torch::Tensor FastWeight::forward(const torch::Tensor& x) { return run(x, nullptr, reference_kernels_); }

torch::Tensor FastWeight::step(const torch::Tensor& x, MixerState& state) {
  // One token is a sequence of length 1 continuing from `state`, O(1) per token. The fused CPU kernels take
  // about 7 us a step against 20 us for the per-timestep ops (B1 H4 D64 M32), so they serve the step form too.
  return run(x.unsqueeze(1), &state, reference_kernels_).squeeze(1);
}

FastWeight::Inputs FastWeight::inputs(const torch::Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1), inner = n_heads_ * head_dim_;
  Inputs in;
  if (folded()) {
    auto qk = folded_qk(x).view({B, T, 2, n_heads_ * spec.m});
    in.rule.fq = projection_map()->activate(split_heads(qk.select(2, 0), n_heads_));
    in.rule.fk = projection_map()->activate(split_heads(qk.select(2, 1), n_heads_));
    in.rule.v = split_heads(torch::linear(x, qkv->weight.narrow(0, 2 * inner, inner), qkv->bias.narrow(0, 2 * inner, inner)),
                            n_heads_);
  } else {
    auto parts = with_lora(qkv, qkv_lora, x).view({B, T, 3, inner});
    in.q_raw = split_heads(parts.select(2, 0), n_heads_), in.k_raw = split_heads(parts.select(2, 1), n_heads_);
    in.rule.fq = phi->forward(in.q_raw, true);
    in.rule.fk = phi->forward(in.k_raw, false);
    in.rule.v = split_heads(parts.select(2, 2), n_heads_);
  }
  // The normaliser rides in the recurrence: fp32 under mixed precision.
  if (spec.norm == "attn") in.rule.fq = kernels::widened_to_fp32(in.rule.fq);
  rule->prepare(in.rule, x);
  return in;
}

torch::Tensor FastWeight::run(const torch::Tensor& x, MixerState* state, bool reference) {
  const int64_t B = x.size(0), T = x.size(1), inner = n_heads_ * head_dim_;
  if (is_training()) phi->resample();
  const auto in = inputs(x);
  auto r = rule->recur(in.rule, RuleRun{state, spec.norm == "attn", reference, chunk_of(spec)});
  auto y = r.y;
  if (spec.swa_window > 0) y = 0.5 * (y + window_softmax(in.q_raw, in.k_raw, in.rule.v, spec.swa_window, state));  // Liger's mix
  if (state) state->S = r.state;
  record_state(r.state);
  return resid_drop(with_lora(o, o_lora, y.transpose(1, 2).reshape({B, T, inner})));
}

torch::Tensor FastWeight::value_coefficients(const torch::Tensor& x) {
  TORCH_CHECK(!folded(), "value_coefficients reads the unfolded projections");
  const auto in = inputs(x);
  auto c = rule->value_coefficients(in.rule, spec.norm == "attn");  // [B, H, channels, T, T]
  if (spec.swa_window > 0) c = 0.5 * (c + softmax_weights(in.q_raw, in.k_raw, spec.swa_window).unsqueeze(2));
  return c;
}

}  // namespace fwlab

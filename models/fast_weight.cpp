// Fast-weight mixers (NOTES.md, "Update rules"). Shapes: B batch, T time, H heads, hd head dim, m features. The
// rule (models/rules/) and the feature map (models/feature_maps/) come from their registries; this file holds
// what every fast-weight layer shares: projections, the feature map, normalization, the sliding window, folding.
#include <algorithm>
#include <cmath>

#include "contract/model/rule_table.h"
#include "models/mixers.h"
#include "models/rules/kernel_families.h"

namespace fwlab {

namespace {

// RMSNorm's epsilon in fla's DeltaNet and GatedDeltaNet layers (norm_eps).
constexpr double kOutNormEps = 1e-5;

// Softmax attention of q over the last `window` keys, [B, H, T, hd]. With a state, the keys and values of up to
// window - 1 earlier tokens come from it and it keeps the last `window` after: the step form's O(window) cache.
torch::Tensor window_softmax(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t window,
                             MixerState* state) {
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

FastWeight::FastWeight(const MixerSpec& s, const ModelConfig& cfg) : AttentionMixer(cfg), spec(s) {
  phi = register_module("phi", make_feature_map(s, cfg.n_heads, cfg.head_dim));
  rule = make_rule(*this, s, cfg);  // registers the rule's parameters on this layer
  resid_drop = register_module("resid_drop", Dropout(cfg.dropout));
  // Random, as a fresh Conv1d is: a converted layer's conv does not start as the identity (the SiLU after it
  // could not be one anyway), so conversion with a conv is a change of architecture the fine-tuning must absorb.
  if (s.conv > 0) add_short_conv(s.conv);
  if (s.out_norm == "rmsnorm") out_norm = register_parameter("out_norm", torch::ones({cfg.head_dim}));
  apply_value_rescale();
  add_lora(cfg);  // last: a model without LoRA draws the same initial weights as before
}

torch::Tensor FastWeight::value_rescale() const {
  auto factor = rule->value_rescale(n_heads_ * head_dim_, qkv->weight.options());
  // The rows of W_v serve every query head of their group: they take the mean of the group's factors (the rule
  // asks for one per query-head channel; with one key/value head per query head nothing changes).
  if (!factor.defined() || groups() == 1) return factor;
  return factor.view({n_kv_heads_, groups(), head_dim_}).mean(1).reshape({-1});
}

void FastWeight::apply_value_rescale() {
  auto factor = value_rescale();
  if (!factor.defined()) return;
  torch::NoGradGuard guard;
  const int64_t v_rows = n_kv_heads_ * head_dim_, offset = n_heads_ * head_dim_ + v_rows;
  qkv->weight.narrow(0, offset, v_rows).mul_(factor.unsqueeze(1));
  if (qkv->bias.defined()) qkv->bias.narrow(0, offset, v_rows).mul_(factor);
}

const ProjectionMap* FastWeight::projection_map() const { return dynamic_cast<const ProjectionMap*>(phi.get()); }

void FastWeight::fold_feature_map() {
  const auto* map = projection_map();
  TORCH_CHECK(map, "only projection feature maps (relu, identity) can be folded, not ", spec.feature_map);
  TORCH_CHECK(!qkv_lora, "merge the LoRA adapters (merge_lora) before folding the feature map");
  TORCH_CHECK(spec.swa_window == 0,
              "a layer with a sliding window reads q and k themselves: its feature map cannot be folded");
  TORCH_CHECK(!positions_or_groups(),
              "rotary positions and grouped key heads sit between the projection and the feature map: "
              "it cannot be folded");
  TORCH_CHECK(qkv->bias.defined(),
              "folding reads the q and k biases: a model without them (qkv_bias = false) keeps its feature map");
  TORCH_CHECK(!conv, "a short convolution sits between the projection and the feature map: it cannot be folded");
  TORCH_CHECK(!folded(), "feature map already folded");
  torch::NoGradGuard guard;
  const int64_t d = qkv->weight.size(1), inner = n_heads_ * head_dim_, m = spec.m;
  auto fold = [&](int64_t block, double scale) {
    auto w = qkv->weight.narrow(0, block * inner, inner).view({n_heads_, head_dim_, d}) * scale;
    auto b = qkv->bias.narrow(0, block * inner, inner).view({n_heads_, head_dim_, 1}) * scale;
    auto w_folded = torch::matmul(map->weight, w);              // [H, m, d]
    auto b_folded = torch::matmul(map->weight, b).squeeze(-1);  // [H, m]
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
  // about 7 us a step against 20 us for the per-timestep ops (B1 H4 D64 M32), so they serve the step form too;
  // a plain decay layer has its own decode step, a few libtorch ops instead of ~37. Off the CPU the recurrence
  // takes its one-token step form (kernels/common/recurrent_step.h) rather than a padded chunk.
  if (auto y = decode_step(x, state)) return *y;
  return run(x.unsqueeze(1), &state, reference_kernels_).squeeze(1);
}

std::vector<torch::Tensor> FastWeight::projections(const torch::Tensor& x, const std::vector<torch::nn::Linear>& layers,
                                                   bool step) {
  if (!reference_kernels_) return fused_(x, layers, step);
  std::vector<torch::Tensor> out;
  for (const auto& layer : layers) out.push_back(torch::linear(x, layer->weight, layer->bias));
  return out;
}

FastWeight::Inputs FastWeight::inputs(const torch::Tensor& x, MixerState* state) {
  const int64_t B = x.size(0), T = x.size(1), inner = n_heads_ * head_dim_;
  Inputs in;
  auto layers = rule->gate_projections();
  std::vector<torch::Tensor> gates;
  if (!folded()) {
    // q, k, v and the gates in one product; then LoLCATs' order: rotary positions, repeat_kv, then the feature
    // map of each query head.
    layers.insert(layers.begin(), qkv);
    auto products = projections(x, layers, state != nullptr);
    gates.assign(products.begin() + 1, products.end());
    auto h = project(x, state ? state->position : 0, state ? &state->conv : nullptr, products[0]);
    in.q_raw = h.q, in.k_raw = repeat_kv(h.k, groups());
    in.rule.fq = phi->forward(in.q_raw, true);
    in.rule.fk = phi->forward(in.k_raw, false);
    in.rule.v = repeat_kv(h.v, groups());
  } else {
    auto qk = folded_qk(x).view({B, T, 2, n_heads_ * spec.m});
    in.rule.fq = projection_map()->activate(split_heads(qk.select(2, 0), n_heads_));
    in.rule.fk = projection_map()->activate(split_heads(qk.select(2, 1), n_heads_));
    in.rule.v = split_heads(
        torch::linear(x, qkv->weight.narrow(0, 2 * inner, inner), qkv->bias.narrow(0, 2 * inner, inner)), n_heads_);
    if (!layers.empty()) gates = projections(x, layers, state != nullptr);
  }
  // The normaliser rides in the recurrence: fp32 under mixed precision.
  if (spec.norm == "attn") in.rule.fq = kernels::widened_to_fp32(in.rule.fq);
  rule->prepare(in.rule, gates);
  return in;
}

torch::Tensor FastWeight::run(const torch::Tensor& x, MixerState* state, bool reference) {
  if (is_training()) phi->resample();
  const auto in = inputs(x, state);
  // The chunk length of the parallel form: the spec's, or the rule's default (contract/model/rule_table.cpp).
  const int64_t chunk = spec.chunk > 0 ? spec.chunk : rule->row().default_chunk;
  auto r = rule->recur(in.rule, RuleRun{state, spec.norm == "attn", reference, chunk});
  auto y = r.y;
  if (spec.swa_window > 0)
    y = 0.5 * (y + window_softmax(in.q_raw, in.k_raw, in.rule.v, spec.swa_window, state));  // Liger's mix
  if (state) state->S = r.state;
  record_state(r.state);
  return resid_drop(output(normalise_heads(y)));
}

torch::Tensor FastWeight::normalise_heads(const torch::Tensor& y) const {
  if (!out_norm.defined()) return y;
  const auto wide = kernels::widened_to_fp32(y);
  const auto rms = torch::rsqrt(wide.pow(2).mean(-1, true) + kOutNormEps);
  return (wide * rms * out_norm.to(wide.scalar_type())).to(y.scalar_type());
}

torch::Tensor FastWeight::value_coefficients(const torch::Tensor& x) {
  TORCH_CHECK(!folded(), "value_coefficients reads the unfolded projections");
  TORCH_CHECK(!conv,
              "with a short convolution the output mixes convolved values, not the value projections: it has no value "
              "coefficients");
  TORCH_CHECK(!out_norm.defined(),
              "an output norm divides each output by its own size: the layer is no weighted sum of its values");
  const auto in = inputs(x, nullptr);
  auto c = rule->value_coefficients(in.rule, spec.norm == "attn");  // [B, H, channels, T, T]
  if (spec.swa_window > 0) c = 0.5 * (c + softmax_weights(in.q_raw, in.k_raw, spec.swa_window).unsqueeze(2));
  return c;
}

}  // namespace fwlab

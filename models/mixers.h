// The concrete token mixers. Parameter names (qkv, o, ...) are shared across mixers on purpose: conversion
// copies every tensor whose name and shape match the source model.
#pragma once

#include "models/feature_maps/feature_map.h"
#include "models/dropout.h"
#include "models/fused_projection.h"
#include "models/lora.h"
#include "models/mixer.h"
#include "models/rope.h"
#include "models/short_conv.h"
#include "models/rules/update_rule.h"

#include <optional>

namespace fwlab {

// Causal softmax weights of q [B, H, T, hd] over keys [B, H, L, hd] (the queries are the last T of the L
// positions), restricted to the last `window` keys (the current one included) when window > 0: [B, H, T, L].
// Softmax and local attention, and the sliding window of a fast-weight layer.
torch::Tensor softmax_weights(const torch::Tensor& q, const torch::Tensor& keys, int64_t window);

// softmax(q kᵀ/√d, causal, windowed) v with `drop` on the probabilities, q, k, v [B, H, T, hd].
// blocked_causal_attention computes it `block` queries at a time, each block against the keys up to its last
// query only: no score, softmax or dropout draw is spent above the diagonal, where the full product spends half
// its work (libtorch 1.13 has no fused CPU attention; at T = 512 the T x T scores, mask, softmax and dropout
// dominate a training step: 4 layers, d 128, batch 8 went from 3.6 s to 0.54 s a step on 2 cores with blocks of 64,
// the fastest of 32, 64 and 128). attention_reference is its plain twin; tests/test_mixers.cpp binds them.
// Sequences of at most `block` tokens take the reference path unchanged.
torch::Tensor attention_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  int64_t window, Dropout& drop);
torch::Tensor blocked_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       int64_t window, Dropout& drop, int64_t block = 64);

// The query, key and value heads of a layer: q [B, H, T, hd]; k, v [B, H_kv, T, hd] (grouped-query attention:
// query head h reads key/value head h / (H / H_kv)). Rotary positions are already applied to q and k.
struct QkvHeads {
  torch::Tensor q, k, v;
};

// [B, H_kv, T, hd] -> [B, H_kv * groups, T, hd]: each key/value head repeated for the query heads that share it
// (Hugging Face's repeat_kv).
torch::Tensor repeat_kv(const torch::Tensor& x, int64_t groups);

// What softmax and fast-weight layers share: the fused q, k, v projection (qkv: rows q, then k, then v), the output
// projection o, their LoRA adapters and rotary positions. The names are the checkpoints' (conversion copies them).
class AttentionMixer : public Mixer {
 public:
  torch::nn::Linear qkv{nullptr}, o{nullptr};
  LoraAdapter qkv_lora{nullptr}, o_lora{nullptr};  // with cfg.lora_rank > 0
  ShortConv conv{nullptr};                         // fast_weight with spec.conv > 0: on q, k, v before rotary positions
  int64_t groups() const { return n_heads_ / n_kv_heads_; }

 protected:
  explicit AttentionMixer(const ModelConfig& cfg);  // registers qkv and o with GPT-2's initialisation
  void add_lora(const ModelConfig& cfg);            // registers the adapters (none without cfg.lora_rank)
  void add_short_conv(int64_t taps);                // registers `conv` over the q, k, v channels
  // x [B, T, d_model] whose first token is at `position` (rotary positions); `conv_cache`: the short
  // convolution's state in the step form (ShortConvImpl::forward); `product`: qkv(x) where the caller has it
  // (a fast-weight layer computes it with its gates', models/fused_projection.h), without the LoRA term.
  QkvHeads project(const torch::Tensor& x, int64_t position, torch::Tensor* conv_cache = nullptr,
                   const torch::Tensor& product = {});
  // y [B, H, T, hd] -> o(y) [B, T, d_model]
  torch::Tensor output(const torch::Tensor& y);

  int64_t n_heads_, n_kv_heads_, head_dim_;
  std::optional<Rope> rope_;
};

// softmax (window = 0: cfg.attention_window, none by default) and local (sliding window of `window` tokens, the
// current one included). The step form caches the n_kv_heads key/value heads, not their repetitions.
class SoftmaxAttention : public AttentionMixer {
 public:
  SoftmaxAttention(const ModelConfig& cfg, int64_t window);
  torch::Tensor forward(const torch::Tensor& x) override;
  torch::Tensor step(const torch::Tensor& x, MixerState& state) override;
  torch::Tensor value_coefficients(const torch::Tensor& x) override;  // the attention probabilities

  Dropout attn_drop{nullptr}, resid_drop{nullptr};

 private:
  torch::Tensor fused_cuda(const QkvHeads& h);  // libtorch's fused attention (PyTorch 2 on CUDA)
  int64_t window_;
};

// Fast-weight mixer: update rule x feature map x normalization x m (NOTES.md); the rule and the map come from
// their registries (models/rules/, models/feature_maps/). With grouped-query attention the key and value heads are
// repeated to every query head before the feature map, after rotary positions (LoLCATs' order, models/README.md).
class FastWeight : public AttentionMixer {
 public:
  FastWeight(const MixerSpec& spec, const ModelConfig& cfg);
  torch::Tensor forward(const torch::Tensor& x) override;
  torch::Tensor step(const torch::Tensor& x, MixerState& state) override;
  // The coefficient of v_s in y_t: the layer's own recurrence run on one-hot values, including gates, decay
  // products, the normaliser and the sliding window's half.
  torch::Tensor value_coefficients(const torch::Tensor& x) override;

  // Factor applied to the value projection (rows of W_v and b_v) when the layer is created or converted, as
  // its rule asks (UpdateRule::value_rescale). Undefined tensor when the layer keeps W_v as it is.
  torch::Tensor value_rescale() const;
  void apply_value_rescale();

  // T2R inference folding (eq. 8): W~ = W_phi W, b~ = W_phi b + b_phi for q and k, so q and k are never formed.
  // Only for projection feature maps (foldable()).
  void fold_feature_map();
  bool folded() const { return !folded_qk.is_empty(); }
  bool foldable() const {
    return projection_map() != nullptr && !positions_or_groups() && qkv->bias.defined() && !conv;
  }

  const MixerSpec spec;
  std::shared_ptr<FeatureMap> phi;
  std::unique_ptr<UpdateRule> rule;  // its parameters are registered on this layer (gate, decay_z, ...)
  torch::Tensor out_norm;            // [head_dim] with spec.out_norm = "rmsnorm": the heads' RMSNorm weight
  torch::nn::Linear folded_qk{nullptr};
  Dropout resid_drop{nullptr};

 private:
  // The given layers' products of x, in their order: one fused product (models/fused_projection.h), or with the
  // reference kernels each apart (the fused product's twin).
  std::vector<torch::Tensor> projections(const torch::Tensor& x, const std::vector<torch::nn::Linear>& layers,
                                         bool step);
  FusedProjection fused_;
  // What the rule's recurrence reads, and q and k before the map (the sliding window's; undefined when folded).
  struct Inputs {
    RuleInputs rule;
    torch::Tensor q_raw, k_raw;
  };
  const ProjectionMap* projection_map() const;  // null for maps that are not a projection
  Inputs inputs(const torch::Tensor& x, MixerState* state);
  torch::Tensor run(const torch::Tensor& x, MixerState* state, bool reference);
  // One token through kernels/decay/decode_step.h where the layer is a plain decay layer on the CPU without
  // gradients (models/fast_weight_decode.cpp); nothing where the general path must run.
  std::optional<torch::Tensor> decode_step(const torch::Tensor& x, MixerState& state);
  bool positions_or_groups() const { return rope_.has_value() || n_kv_heads_ != n_heads_; }
  // y [B, H, T, hd] with each head's output RMS-normalised over hd and scaled by out_norm (fp32 arithmetic, as
  // fla's RMSNorm(dtype = float32)); y itself without an output norm.
  torch::Tensor normalise_heads(const torch::Tensor& y) const;
};

// SRU (spec.kind == "sru") and SRU++ ("srupp", attention inside the recurrence input when spec.attention).
class Sru : public Mixer {
 public:
  Sru(const MixerSpec& spec, const ModelConfig& cfg);
  torch::Tensor forward(const torch::Tensor& x) override;
  torch::Tensor step(const torch::Tensor& x, MixerState& state) override;

  const MixerSpec spec;
  torch::nn::Linear w{nullptr};                             // sru: U = W x
  torch::nn::Linear w1{nullptr}, w2{nullptr}, w3{nullptr};  // srupp: Q = W1 x, [K, V] = W2 Q, U = W3 (...)
  torch::nn::LayerNorm ln{nullptr};
  torch::Tensor alpha, v_f, v_r, b_f, b_r;
  Dropout resid_drop{nullptr};

 private:
  torch::Tensor run(const torch::Tensor& x, MixerState* state);
  torch::Tensor attend(const torch::Tensor& q, MixerState* state);
  int64_t d_model_, attn_dim_;
};

}  // namespace fwlab

// The concrete token mixers. Parameter names (qkv, o, ...) are shared across mixers on purpose: conversion
// copies every tensor whose name and shape match the source model.
#pragma once

#include "models/feature_maps.h"
#include "models/dropout.h"
#include "models/lora.h"
#include "models/mixer.h"

namespace fwlab {

// softmax (window = 0) and local (sliding window of `window` tokens, the current one included).
class SoftmaxAttention : public Mixer {
 public:
  SoftmaxAttention(const ModelConfig& cfg, int64_t window);
  torch::Tensor forward(const torch::Tensor& x) override;
  torch::Tensor step(const torch::Tensor& x, MixerState& state) override;

  torch::nn::Linear qkv{nullptr}, o{nullptr};
  LoraAdapter qkv_lora{nullptr}, o_lora{nullptr};  // with cfg.lora_rank > 0
  Dropout attn_drop{nullptr}, resid_drop{nullptr};

 private:
  int64_t n_heads_, head_dim_, window_;
};

// Fast-weight mixer: rule (add | delta | gated | decay) x feature map x normalization x m (NOTES.md).
// The LoRA adapters of a layer's qkv and o (none without cfg.lora_rank), registered on `owner`.
void add_lora(torch::nn::Module& owner, const ModelConfig& cfg, LoraAdapter& qkv_lora, LoraAdapter& o_lora);

class FastWeight : public Mixer {
 public:
  FastWeight(const MixerSpec& spec, const ModelConfig& cfg);
  torch::Tensor forward(const torch::Tensor& x) override;
  torch::Tensor step(const torch::Tensor& x, MixerState& state) override;

  // Factor applied to the value projection (rows of W_v and b_v) when the layer is created or converted:
  // decay: 1 - sigmoid(b_z) per value dimension (Mao 2022, sec. 3); add without feature map and without
  // normalization: 1/512 (Mao, footnote 4). Undefined tensor when the layer keeps W_v as it is.
  torch::Tensor value_rescale() const;
  void apply_value_rescale();

  // T2R inference folding (eq. 8): W~ = W_phi W, b~ = W_phi b + b_phi for q and k, so q and k are never formed.
  // Only for projection feature maps (relu, identity).
  void fold_feature_map();
  bool folded() const { return !folded_qk.is_empty(); }

  const MixerSpec spec;
  torch::nn::Linear qkv{nullptr}, o{nullptr};
  LoraAdapter qkv_lora{nullptr}, o_lora{nullptr};  // with cfg.lora_rank > 0
  std::shared_ptr<FeatureMap> phi;
  torch::nn::Linear gate{nullptr};                  // gated: g, delta: beta (one scalar per head)
  torch::nn::Linear decay_z{nullptr}, decay_f{nullptr};  // decay: value-side and key-side gates
  torch::nn::Linear folded_qk{nullptr};
  Dropout resid_drop{nullptr};

 private:
  torch::Tensor run(const torch::Tensor& x, MixerState* state, bool reference);
  int64_t n_heads_, head_dim_;
};

// SRU (spec.kind == "sru") and SRU++ ("srupp", attention inside the recurrence input when spec.attention).
class Sru : public Mixer {
 public:
  Sru(const MixerSpec& spec, const ModelConfig& cfg);
  torch::Tensor forward(const torch::Tensor& x) override;
  torch::Tensor step(const torch::Tensor& x, MixerState& state) override;

  const MixerSpec spec;
  torch::nn::Linear w{nullptr};                       // sru: U = W x
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

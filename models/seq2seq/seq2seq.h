// The encoder-decoder of the seed papers' translation experiments (fairseq's transformer, T2R Table 2, SRU++
// Table 8): post-LN layers, one embedding shared by source, target and output, scaled by sqrt(d_model), fairseq's
// sinusoidal positions, ReLU MLP. The encoder is bidirectional softmax attention over the non-pad source. Every
// decoder layer has a causal self mixer made by make_mixer (every rule fwlab has, with its own m) and cross
// attention over the encoder's output: softmax, or T2R's fast-weight read of the summed source.
#pragma once

#include <torch/torch.h>

#include "contract/model/model_config.h"
#include "models/dropout.h"
#include "models/feature_maps/feature_map.h"
#include "models/mixer.h"

namespace fwlab {

// t's rows (dimension 0) in the order `rows` gives (beam search reorders its hypotheses); an undefined t as is.
inline torch::Tensor rows_if_defined(const torch::Tensor& t, const torch::Tensor& rows) {
  return t.defined() ? t.index_select(0, rows) : t;
}

// What a decoder's cross attention reads of one batch of sources, computed once per source: softmax keeps the
// projected keys and values with the pad mask, a fast-weight read keeps S = sum phi(k_j) v_j^T and
// z = sum phi(k_j) over the non-pad source tokens (T2R's cross_attention.py), whatever the source length.
struct CrossMemory {
  torch::Tensor k, v, pad;                      // softmax: [B, H, S, hd] x 2, pad [B, S] (true at padding)
  torch::Tensor S, z;                           // fast weight: [B, H, m, hd], [B, H, m]
  void select_rows(const torch::Tensor& rows);  // beam search: new row i is old row rows[i]
};

// Attention of queries x over a memory: the encoder's self-attention (memory = x) and the decoder's cross
// attention. q, kv (keys then values) and o are named alike in both kinds, so that converting softmax cross
// attention to a fast-weight read copies them and creates only the feature map phi.
class PaddedAttentionImpl : public torch::nn::Module {
 public:
  PaddedAttentionImpl(const MixerSpec& spec, const ModelConfig& cfg);
  CrossMemory remember(const torch::Tensor& memory, const torch::Tensor& pad);  // memory [B, S, d], pad [B, S]
  torch::Tensor forward(const torch::Tensor& x, const CrossMemory& memory);     // x [B, T, d] -> [B, T, d]

  torch::nn::Linear q{nullptr}, kv{nullptr}, o{nullptr};
  std::shared_ptr<FeatureMap> phi;  // fast weight only

 private:
  torch::Tensor heads(const torch::Tensor& x) const;  // [B, T, H * hd] -> [B, H, T, hd]
  torch::Tensor softmax_read(const torch::Tensor& q, const CrossMemory& memory);
  torch::Tensor fast_weight_read(const torch::Tensor& q, const CrossMemory& memory) const;
  int64_t n_heads_, head_dim_;
};
TORCH_MODULE(PaddedAttention);

// The SRU++ encoder mixer (cfg.encoder.kind == "srupp"; Lei 2021 with asappresearch/sru's bidirectional cells):
// SRU++'s input transform with single-head attention over every non-pad source token, then the elementwise
// recurrence run forward on the first half of the channels and backward on the second (each row reversed within
// its own length, so right padding never reaches a real token). The cell's parameters are an Sru mixer's
// (models/mixers.h), registered as `cell`.
class BidirectionalSruImpl : public torch::nn::Module {
 public:
  BidirectionalSruImpl(const MixerSpec& spec, const ModelConfig& cfg);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& pad);  // x [B, S, d], pad [B, S] -> [B, S, d]
  void set_reference_kernels(bool on) { reference_ = on; }

  std::shared_ptr<Mixer> cell;

 private:
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& pad);
  bool reference_ = false;
};
TORCH_MODULE(BidirectionalSru);

// Each row of x [B, S, ...] reversed within its first lengths[b] positions, the rest left in place: applied twice,
// the identity.
torch::Tensor reverse_within_lengths(const torch::Tensor& x, const torch::Tensor& lengths);

class EncoderLayerImpl : public torch::nn::Module {
 public:
  explicit EncoderLayerImpl(const ModelConfig& cfg);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& pad);

  PaddedAttention attn{nullptr};  // cfg.encoder softmax
  BidirectionalSru sru{nullptr};  // cfg.encoder srupp
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::Linear fc{nullptr}, proj{nullptr};
  Dropout drop{nullptr};

 private:
  std::string activation_;
};
TORCH_MODULE(EncoderLayer);

class DecoderLayerImpl : public torch::nn::Module {
 public:
  DecoderLayerImpl(const MixerSpec& spec, const ModelConfig& cfg);
  torch::Tensor forward(const torch::Tensor& x, const CrossMemory& memory);
  torch::Tensor step(const torch::Tensor& x, MixerState& state, const CrossMemory& memory);  // x [B, d]

  std::shared_ptr<Mixer> mixer;  // causal self mixer: softmax, or any recurrent rule
  PaddedAttention cross{nullptr};
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr}, ln3{nullptr};
  torch::nn::Linear fc{nullptr}, proj{nullptr};
  Dropout drop{nullptr};

 private:
  torch::Tensor after_mixer(const torch::Tensor& x, const torch::Tensor& mixed, const CrossMemory& memory);
  std::string activation_;
};
TORCH_MODULE(DecoderLayer);

// The MLP of both layer kinds: proj(act(fc x)).
torch::Tensor feed_forward(torch::nn::Linear& fc, torch::nn::Linear& proj, const std::string& activation,
                           const torch::Tensor& x);

// Per-sentence decoding state: each decoder layer's self-mixer state and cross memory. Rows are sentences (times
// beams); select_rows reorders them all.
struct DecoderState {
  std::vector<MixerState> self;
  std::vector<CrossMemory> cross;
  int64_t position = 0;
  void select_rows(const torch::Tensor& rows);
  // The attention memory carried for the whole batch: the self mixers' KV caches or states, and the cross
  // memory (the source's keys and values, or S and z). T2R Fig. 3's "attention memory".
  int64_t bytes() const;
};

class Seq2SeqImpl : public torch::nn::Module {
 public:
  explicit Seq2SeqImpl(const ModelConfig& cfg);  // validates cfg; it must be an encoder-decoder

  // src [B, S] (padded with `pad`), prev [B, T] (the decoder's input: BOS then the target) -> logits [B, T, vocab].
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& prev);
  // The encoder's output [B, S, d] and the cross memories it gives each decoder layer.
  std::vector<CrossMemory> encode(const torch::Tensor& src);
  torch::Tensor decode(const torch::Tensor& prev, const std::vector<CrossMemory>& memory);  // -> logits [B, T, V]
  // Decoding one token at a time: start() encodes, step(tokens [B]) -> logits [B, vocab].
  DecoderState start(const torch::Tensor& src);
  torch::Tensor step(const torch::Tensor& tokens, DecoderState& state);

  const ModelConfig& config() const { return cfg_; }
  const std::vector<DecoderLayer>& decoder_layers() const { return decoder_; }
  void set_reference_kernels(bool on);
  static constexpr int64_t kPad = 0;  // the joint vocabulary's ids (text/tokenizers/joint_vocabulary.h)

  torch::nn::Embedding embed{nullptr};
  Dropout drop{nullptr};

 private:
  torch::Tensor embed_tokens(const torch::Tensor& tokens, int64_t first_position);  // [B, T] -> [B, T, d]
  ModelConfig cfg_;
  std::vector<EncoderLayer> encoder_;
  std::vector<DecoderLayer> decoder_;
};
TORCH_MODULE(Seq2Seq);

// fairseq's sinusoidal position embedding (sin of every frequency, then cos): [n, dim] for positions
// first .. first + n - 1.
torch::Tensor sinusoidal_positions(int64_t first, int64_t n, int64_t dim, const torch::TensorOptions& options);

}  // namespace fwlab

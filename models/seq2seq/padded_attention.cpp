// Attention over a padded memory (models/seq2seq/seq2seq.h): the encoder's self-attention and the decoder's cross
// attention, softmax or T2R's fast-weight read.
#include <cmath>

#include "models/seq2seq/seq2seq.h"

namespace fwlab {

namespace {

// T2R's floor on the read's normaliser |phi(q).z| (cross_attention.py): a query whose features miss every
// source key divides by this instead of by ~0.
constexpr double kReadFloor = 1e-2;

// fairseq's MultiheadAttention initialisation: Xavier uniform (gain 1/sqrt(2) for the fused in-projections, as
// its q, k, v each get when they are separate), zero output bias.
torch::nn::Linear xavier(int64_t in, int64_t out, bool bias, double gain) {
  torch::nn::Linear layer(torch::nn::LinearOptions(in, out).bias(bias));
  torch::nn::init::xavier_uniform_(layer->weight, gain);
  if (bias) torch::nn::init::zeros_(layer->bias);
  return layer;
}

}  // namespace

void CrossMemory::select_rows(const torch::Tensor& rows) {
  k = rows_if_defined(k, rows), v = rows_if_defined(v, rows), pad = rows_if_defined(pad, rows);
  S = rows_if_defined(S, rows), z = rows_if_defined(z, rows);
}

PaddedAttentionImpl::PaddedAttentionImpl(const MixerSpec& spec, const ModelConfig& cfg)
    : n_heads_(cfg.n_heads), head_dim_(cfg.head_dim) {
  const int64_t d = cfg.d_model, inner = cfg.n_heads * cfg.head_dim;
  const double in_gain = 1.0 / std::sqrt(2.0);
  q = register_module("q", xavier(d, inner, cfg.qkv_bias, in_gain));
  kv = register_module("kv", xavier(d, 2 * inner, cfg.qkv_bias, in_gain));
  o = register_module("o", xavier(inner, d, cfg.o_bias, 1.0));
  if (spec.kind == "fast_weight") phi = register_module("phi", make_feature_map(spec, cfg.n_heads, cfg.head_dim));
}

torch::Tensor PaddedAttentionImpl::heads(const torch::Tensor& x) const {
  return x.view({x.size(0), x.size(1), n_heads_, head_dim_}).transpose(1, 2);
}

CrossMemory PaddedAttentionImpl::remember(const torch::Tensor& memory, const torch::Tensor& pad) {
  auto kv_heads = kv(memory).chunk(2, -1);
  auto k = heads(kv_heads[0]), v = heads(kv_heads[1]);  // [B, H, S, hd]
  if (!phi) return CrossMemory{k, v, pad, {}, {}};
  auto keep = (~pad).to(v.scalar_type()).view({pad.size(0), 1, pad.size(1), 1});
  auto phi_k = phi->forward(k, /*is_query=*/false) * keep;  // pad keys add nothing to the sums
  return CrossMemory{{}, {}, {}, torch::matmul(phi_k.transpose(-1, -2), v), phi_k.sum(2)};
}

torch::Tensor PaddedAttentionImpl::softmax_read(const torch::Tensor& q_heads, const CrossMemory& m) {
  auto scores =
      torch::matmul(q_heads, m.k.transpose(-1, -2)) / std::sqrt(static_cast<double>(head_dim_));  // [B, H, T, S]
  scores =
      scores.masked_fill(m.pad.view({m.pad.size(0), 1, 1, m.pad.size(1)}), -std::numeric_limits<double>::infinity());
  // No dropout on the probabilities: fairseq's transformer defaults attention_dropout to 0.
  return torch::matmul(torch::softmax(scores, -1), m.v);
}

torch::Tensor PaddedAttentionImpl::fast_weight_read(const torch::Tensor& q_heads, const CrossMemory& m) const {
  auto phi_q = phi->forward(q_heads, /*is_query=*/true);                                   // [B, H, T, m]
  auto numerator = torch::matmul(phi_q, m.S);                                              // [B, H, T, hd]
  auto denominator = torch::matmul(phi_q, m.z.unsqueeze(-1)).abs().clamp_min(kReadFloor);  // [B, H, T, 1]
  return numerator / denominator;
}

torch::Tensor PaddedAttentionImpl::forward(const torch::Tensor& x, const CrossMemory& memory) {
  auto q_heads = heads(q(x));
  auto y = phi ? fast_weight_read(q_heads, memory) : softmax_read(q_heads, memory);  // [B, H, T, hd]
  return o(y.transpose(1, 2).reshape({x.size(0), x.size(1), n_heads_ * head_dim_}));
}

}  // namespace fwlab

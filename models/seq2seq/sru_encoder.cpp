// The bidirectional SRU++ encoder mixer (models/seq2seq/seq2seq.h). asappresearch/sru's SRUppCell with
// bidirectional=True gives each direction half the hidden units; its attention (SRUppAttention) takes the pad mask of
// the source, and its recurrence leaves the state unchanged over pad positions. Here the backward direction runs on
// each row reversed within its own length, which keeps the right padding after every real token in both directions.
#include <limits>

#include "kernels/sru/sru.h"
#include "models/mixers.h"
#include "models/seq2seq/seq2seq.h"

namespace fwlab {

torch::Tensor reverse_within_lengths(const torch::Tensor& x, const torch::Tensor& lengths) {
  const int64_t S = x.size(1);
  auto t = torch::arange(S, lengths.options()).unsqueeze(0);  // [1, S]
  auto len = lengths.unsqueeze(1);                            // [B, 1]
  auto index = torch::where(t < len, len - 1 - t, t);         // [B, S]
  auto shape = index.sizes().vec();
  for (int64_t d = 2; d < x.dim(); ++d) index = index.unsqueeze(-1), shape.push_back(x.size(d));
  return x.gather(1, index.expand(shape));
}

BidirectionalSruImpl::BidirectionalSruImpl(const MixerSpec& spec, const ModelConfig& cfg) {
  cell = register_module("cell", make_mixer(spec, cfg));
}

// Single-head attention of every source position over every non-pad one (SRU++'s attention, unmasked in time).
torch::Tensor BidirectionalSruImpl::attend(const torch::Tensor& q, const torch::Tensor& pad) {
  auto& sru = static_cast<Sru&>(*cell);
  auto kv = sru.w2(q).chunk(2, -1);
  auto scores = torch::matmul(q, kv[0].transpose(-1, -2)) / std::sqrt(static_cast<double>(q.size(-1)));  // [B, S, S]
  scores = scores.masked_fill(pad.unsqueeze(1), -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1), kv[1]);
}

torch::Tensor BidirectionalSruImpl::forward(const torch::Tensor& x, const torch::Tensor& pad) {
  auto& sru = static_cast<Sru&>(*cell);
  const int64_t B = x.size(0), S = x.size(1), d = x.size(2), half = d / 2;
  auto q = sru.w1(x);
  auto u = sru.spec.attention ? sru.w3(sru.ln(q + sru.alpha * attend(q, pad))) : sru.w3(q);
  auto U = u.view({B, S, 3, d});
  auto recurrence = reference_ ? kernels::sru_recurrence_naive : kernels::sru_recurrence_fused;
  // Channels are independent: each direction runs on all of them and keeps its half.
  auto forward_h = recurrence(U, x, sru.v_f, sru.v_r, sru.b_f, sru.b_r, torch::Tensor()).y;
  const auto lengths = (~pad).sum(1);
  auto backward_h = recurrence(reverse_within_lengths(U, lengths), reverse_within_lengths(x, lengths), sru.v_f, sru.v_r,
                               sru.b_f, sru.b_r, torch::Tensor())
                        .y;
  auto h = torch::cat(
      {forward_h.narrow(2, 0, half), reverse_within_lengths(backward_h, lengths).narrow(2, half, d - half)}, 2);
  return sru.resid_drop(h);
}

}  // namespace fwlab

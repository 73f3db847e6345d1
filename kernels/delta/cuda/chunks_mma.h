// The delta family's chunk programs with their products on tensor cores: the same results as the plain programs of
// kernels/delta/cuda/chunks.h (whose comment has the notation), each product a block_mma (kernels/cuda/warp_mma.h,
// m16n8k16, fp32 accumulation) whose epilogue applies the pair decays, masks and gate scalings in registers:
//   prepare:  A = beta (K K^T) * E below the diagonal (stored in Acc), then (I + A) [W | U] = R solved in blocks of
//             16 rows: a product per block, a 16-step substitution in Acc inside it (block_solve_mma);
//   outputs:  P = (Q K^T) * E on and below it, stored once in the operand type, then y = e^g * (Q S_n^T) + P U;
//   du pairs: P again, du = P^T dy.
// As in flash-linear-attention's chunk kernels, the operands that were fp32 (the state, u, P, A's off-diagonal
// blocks and the solved rows in the solve) are rounded to the operand type (bf16 or fp16) for the products. Unlike the
// decay kernel's states (which may grow without bound under the additive rule, so its stages are scaled by powers of
// two) the delta rule's state stays bounded (unit keys, beta in [0, 1]); an fp16 operand past 65,504 (a gradient under
// a large loss scale) becomes inf, which fwlab's fp16 loss scaler meets as any overflow: the step is skipped and the
// scale halved. The GPU runs these for bf16 and fp16 on sm_80 and newer; the host runs them in any type through the
// warp emulation (kernels/cuda/warp_mma_host.h), float64 included, so that the fragment bookkeeping is checked against
// the plain programs (tests/test_warp_mma.cpp). Blocks of whole warps.
#pragma once

#include "kernels/cuda/warp_mma.h"
#include "kernels/delta/cuda/chunks.h"

namespace fwlab::cuda::delta {

// Depth ranges of the causal products (block_mma's `range`), for a tile of C whose first row is r0, column c0.
struct OnOrBelowDiagonal {  // C[t, s] for s <= t only: tiles wholly above the diagonal take no product
  int64_t depth;
  FWLAB_HD int64_t begin(int64_t, int64_t) const { return 0; }
  FWLAB_HD int64_t end(int64_t r0, int64_t c0) const { return c0 <= r0 + 15 ? depth : 0; }
};
struct UpToRow {  // C[t, .] = sum_{s <= t} ...: depth up to the tile's last row
  FWLAB_HD int64_t begin(int64_t, int64_t) const { return 0; }
  FWLAB_HD int64_t end(int64_t r0, int64_t) const { return r0 + 16; }
};
struct FromRow {  // C[t, .] = sum_{s >= t} ...: depth from the tile's first row
  FWLAB_HD int64_t begin(int64_t r0, int64_t) const { return r0; }
  FWLAB_HD int64_t end(int64_t, int64_t) const { return kChunk; }
};

// The chunk's inputs and workspaces as the products read them: zeros past their widths.
template <typename In, typename Acc>
struct MmaOperands {
  const ChunkView<In, Acc>& c;
  FWLAB_HD In zero() const { return convert<In>(Acc(0)); }
  FWLAB_HD In q(int64_t t, int64_t j) const { return j < c.p.M ? c.p.q[(c.row + t) * c.p.M + j] : zero(); }
  FWLAB_HD In k(int64_t t, int64_t j) const { return j < c.p.M ? c.p.k[(c.row + t) * c.p.M + j] : zero(); }
  FWLAB_HD In dy(int64_t t, int64_t i) const { return i < c.p.D ? c.p.dy[(c.row + t) * c.p.D + i] : zero(); }
  FWLAB_HD Acc u(int64_t t, int64_t i) const { return i < c.p.D ? c.u(t)[i] : Acc(0); }
  FWLAB_HD int64_t depth_M() const { return round16(c.p.M); }
};

// The scratch of the outputs and du-pairs programs: P [kChunk, kPairsLd] in the operand type (8 elements longer than
// a row, so that the 8 rows one fragment load touches fall in different shared-memory banks).
template <typename In>
struct PairsMma {
  static constexpr int64_t kPairsLd = kChunk + 8;
  FWLAB_HD static constexpr int64_t bytes() { return kChunk * kPairsLd * int64_t(sizeof(In)); }
};

// (I + A) X = R in blocks of kSub rows, X = [W | U] in place of R (an [kChunk, M + D] matrix `x(t, col)`, in
// global memory or scratch): for block I = 0, 1, ..., X_I = (I + A_II)^-1 (R_I - A_{I,<I} X_{<I}), the product on
// tensor cores, the 16-step substitution inside the block scalar (column by column, no barrier inside). Transposed
// (the backward's (I + A)^T dR = R): blocks from the last, X_I = (I + A_II)^-T (R_I - (A_{>I,I})^T X_{>I}).
template <bool Transposed, typename In, typename Acc, typename At>
FWLAB_HD void block_solve_mma(const BlockCtx& ctx, const Acc* A, int64_t width, const At& x) {
  for (int64_t step = 0; step < kChunk / kSub; ++step) {
    const int64_t I = Transposed ? kChunk / kSub - 1 - step : step, first = I * kSub;
    const int64_t known0 = Transposed ? first + kSub : 0, known = Transposed ? kChunk - known0 : first;
    if (known > 0) {
      block_mma<In, Acc>(
          ctx, kSub, width, known,
          [&](int64_t r, int64_t s) {  // A_{I,<I}, or (A_{>I,I})^T
            return Transposed ? A[(known0 + s) * kChunk + first + r] : A[(first + r) * kChunk + known0 + s];
          },
          [&](int64_t s, int64_t col) { return col < width ? x(known0 + s, col) : Acc(0); },
          [&](int64_t r, int64_t col, Acc sum) { x(first + r, col) -= sum; });
      ctx.sync();
    }
    for (int64_t col = ctx.tid; col < width; col += ctx.threads)
      for (int64_t k = 0; k < kSub; ++k) {
        const int64_t t = Transposed ? first + kSub - 1 - k : first + k;
        Acc v = x(t, col);
        for (int64_t j = 0; j < k; ++j) {
          const int64_t s = Transposed ? t + 1 + j : first + j;
          v -= (Transposed ? A[s * kChunk + t] : A[t * kChunk + s]) * x(s, col);
        }
        x(t, col) = v;
      }
    ctx.sync();
  }
}

// g and A (Acc [kChunk, kChunk]) on tensor cores, then [W | U] by the blocked solve.
template <typename In, typename Acc>
FWLAB_HD void prepare_chunk_mma(const BlockCtx& ctx, const Problem<In, Acc>& p, int64_t h, int64_t n, Acc* A) {
  const ChunkView<In, Acc> c(p, h, n);
  const MmaOperands<In, Acc> o{c};
  if (ctx.tid == 0) {
    Acc run = 0;
    for (int64_t t = 0; t < kChunk; ++t) p.g[c.row + t] = run += p.log_alpha ? p.log_alpha[c.row + t] : Acc(0);
  }
  ctx.sync();
  block_mma<In, Acc>(
      ctx, kChunk, kChunk, [&](int64_t t, int64_t j) { return o.k(t, j); },
      [&](int64_t j, int64_t s) { return o.k(s, j); },
      [&](int64_t t, int64_t s, Acc kk) { A[t * kChunk + s] = s < t ? c.beta(t) * kk * c.decay(t, s) : Acc(0); },
      OnOrBelowDiagonal{o.depth_M()});
  for (int64_t e = ctx.tid; e < kChunk * (p.M + p.D); e += ctx.threads) {  // the right-hand side [beta e^g k | beta v]
    const int64_t t = e / (p.M + p.D), col = e % (p.M + p.D);
    c.X(t, col) = col < p.M ? c.beta(t) * exp_acc(c.g(t)) * c.k(t, col) : c.beta(t) * c.v(t, col - p.M);
  }
  ctx.sync();
  block_solve_mma<false, In>(ctx, A, p.M + p.D, [&](int64_t t, int64_t col) -> Acc& { return c.X(t, col); });
}

// P_ts = (q_t . k_s) e_ts on and below the diagonal, zeros above, into P (the operand type, PairsMma's layout).
template <typename In, typename Acc>
FWLAB_HD void masked_scores_mma(const BlockCtx& ctx, const MmaOperands<In, Acc>& o, In* P) {
  block_mma<In, Acc>(
      ctx, kChunk, kChunk, [&](int64_t t, int64_t j) { return o.q(t, j); },
      [&](int64_t j, int64_t s) { return o.k(s, j); },
      [&](int64_t t, int64_t s, Acc qk) {
        P[t * PairsMma<In>::kPairsLd + s] = convert<In>(s <= t ? qk * o.c.decay(t, s) : Acc(0));
      },
      OnOrBelowDiagonal{o.depth_M()});
  ctx.sync();
}

// y of chunk n of head h (Acc [heads, steps, D]), as chunk_outputs writes it. Scratch: PairsMma.
template <typename In, typename Acc>
FWLAB_HD void chunk_outputs_mma(const BlockCtx& ctx, const Problem<In, Acc>& p, int64_t h, int64_t n, const Acc* states,
                                Acc* y, In* P) {
  const ChunkView<In, Acc> c(p, h, n);
  const MmaOperands<In, Acc> o{c};
  masked_scores_mma(ctx, o, P);
  const Acc* S = states + p.state_at(h, n);
  auto q = [&](int64_t t, int64_t j) { return o.q(t, j); };
  auto S_t = [&](int64_t j, int64_t i) { return i < p.D && j < p.M ? S[i * p.M + j] : Acc(0); };  // S^T
  block_mma<In, Acc>(ctx, kChunk, p.D, o.depth_M(), q, S_t,
                     [&](int64_t t, int64_t i, Acc read) { y[(c.row + t) * p.D + i] = exp_acc(c.g(t)) * read; });
  // The same tiles go to the same lanes in both calls: each lane adds to what it wrote, no barrier between.
  block_mma<In, Acc>(
      ctx, kChunk, p.D, [&](int64_t t, int64_t s) { return P[t * PairsMma<In>::kPairsLd + s]; },
      [&](int64_t s, int64_t i) { return o.u(s, i); },
      [&](int64_t t, int64_t i, Acc pairs) { y[(c.row + t) * p.D + i] += pairs; }, UpToRow{});
  ctx.sync();
}

// du's state-independent part du_t = sum_{s>=t} P_st dy_s, as chunk_du_pairs writes it. Scratch: PairsMma.
template <typename In, typename Acc>
FWLAB_HD void chunk_du_pairs_mma(const BlockCtx& ctx, const Problem<In, Acc>& p, int64_t h, int64_t n, In* P) {
  const ChunkView<In, Acc> c(p, h, n);
  const MmaOperands<In, Acc> o{c};
  masked_scores_mma(ctx, o, P);
  block_mma<In, Acc>(
      ctx, kChunk, p.D, [&](int64_t t, int64_t s) { return P[s * PairsMma<In>::kPairsLd + t]; },  // P^T
      [&](int64_t s, int64_t i) { return o.dy(s, i); }, [&](int64_t t, int64_t i, Acc x) { c.du(t)[i] = x; },
      FromRow{});
  ctx.sync();
}

}  // namespace fwlab::cuda::delta

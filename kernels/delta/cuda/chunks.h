// The delta family's chunked kernel as block programs: the code both the CUDA kernels (chunks.cu, one thread block per
// program) and the host run (chunks_host.h, threads emulating a block, tests/test_delta_chunks_kernel.cpp), so that
// the arithmetic and the barriers are checked in float64 on any machine and the GPU adds only the parallel launch.
//
//   S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T,   y_t = S_t q_t   (S [D, M];
//   kernels/delta/delta.h)
//
// alpha = 1 is the delta rule. Per chunk of kChunk steps, with g_t = sum_{r<=t} log alpha_r from the chunk's start
// (chunk-local: no scan along the sequence anywhere) and e_ts = e^{g_t - g_s} <= 1 for s <= t, the WY / UT form of
// "Parallelizing Linear Transformers with the Delta Rule over Sequence Length" (Yang et al. 2024) with the gates of
// "Gated Delta Networks" (Yang, Kautz & Hatamizadeh 2025):
//   A_ts = beta_t (k_t . k_s) e_ts (s < t),   (I + A) [W | U] = [beta_t e^{g_t} k_t | beta_t v_t]   (one solve)
//   u_t = U_t - S_n W_t,   y_t = e^{g_t} S_n q_t + sum_{s<=t} (q_t . k_s) e_ts u_s,
//   S_{n+1} = e^{g_end} S_n + sum_t u_t (e^{g_end - g_t} k_t)^T.
// Kernels: prepare (g, W, U per chunk, all chunks at once), a state scan over chunks split by state rows (row i of
// u and of S_{n+1} reads only row i of S_n), the outputs per chunk. Backward: prepare and the forward scan again (no
// state kept between the passes), the state-independent part of du (P^T dy), a reverse scan for dS_n and du, and
// one gradient program per chunk giving dq, dk, dv, d beta and d log alpha (chunk-local reverse sums).
// Here the products are plain loops in the accumulation type: the reference programs, and what fp32 and fp64 run on
// the GPU. bf16 and fp16 run the tensor-core programs of kernels/delta/cuda/chunks_mma.h and
// chunk_gradients_mma.h, which the tests bind to these.
#pragma once

#include "kernels/decay/cuda/chunks.h"  // BlockCtx, kChunk, kScanRows, convert, exp_acc, FWLAB_HD

namespace fwlab::cuda::delta {

using fwlab::cuda::BlockCtx;
using fwlab::cuda::convert;
using fwlab::cuda::exp_acc;
using fwlab::cuda::kChunk;
using fwlab::cuda::kScanRows;

// The problem after the binding's preparation (steps padded to a multiple of kChunk with beta = 0, log alpha = 0).
// In: q, k, v, dy's type; Acc: everything else. Shapes: q, k [heads, steps, M]; v, dy [heads, steps, D]; beta,
// log_alpha (null: the delta rule) [heads, steps]; state0, dstate_final [heads, D, M] (null: zeros).
// Workspaces the programs write: g [heads, steps]; W [heads, steps, M]; U, u, du [heads, steps, D].
template <typename In, typename Acc>
struct Problem {
  const In *q = nullptr, *k = nullptr, *v = nullptr, *dy = nullptr;
  const Acc *beta = nullptr, *log_alpha = nullptr, *state0 = nullptr, *dstate_final = nullptr;
  Acc *g = nullptr, *W = nullptr, *U = nullptr, *u = nullptr, *du = nullptr;
  int64_t heads = 0, steps = 0, D = 0, M = 0;

  FWLAB_HD int64_t chunks() const { return steps / kChunk; }
  FWLAB_HD int64_t at(int64_t h, int64_t n, int64_t t) const { return h * steps + n * kChunk + t; }
  FWLAB_HD int64_t state_at(int64_t h, int64_t n) const { return (h * (chunks() + 1) + n) * D * M; }
};

// What the backward's gradient programs write, all Acc: dq, dk [heads, steps, M]; dv [heads, steps, D]; dbeta,
// dlog_alpha [heads, steps] (dlog_alpha null for the delta rule).
template <typename Acc>
struct Gradients {
  Acc *dq = nullptr, *dk = nullptr, *dv = nullptr, *dbeta = nullptr, *dlog_alpha = nullptr;
};

// One chunk's rows of head h, with the dot products the programs take (a row of q, k: M values; of v, dy, u: D).
template <typename In, typename Acc>
struct ChunkView {
  const Problem<In, Acc>& p;
  int64_t row;  // the chunk's first step's row
  FWLAB_HD ChunkView(const Problem<In, Acc>& p_, int64_t h, int64_t n) : p(p_), row(p_.at(h, n, 0)) {}
  FWLAB_HD Acc q(int64_t t, int64_t j) const { return convert<Acc>(p.q[(row + t) * p.M + j]); }
  FWLAB_HD Acc k(int64_t t, int64_t j) const { return convert<Acc>(p.k[(row + t) * p.M + j]); }
  FWLAB_HD Acc v(int64_t t, int64_t i) const { return convert<Acc>(p.v[(row + t) * p.D + i]); }
  FWLAB_HD Acc dy(int64_t t, int64_t i) const { return convert<Acc>(p.dy[(row + t) * p.D + i]); }
  FWLAB_HD Acc beta(int64_t t) const { return p.beta[row + t]; }
  FWLAB_HD Acc g(int64_t t) const { return p.g[row + t]; }
  FWLAB_HD Acc decay(int64_t t, int64_t s) const { return exp_acc(g(t) - g(s)); }  // e_ts, s <= t
  FWLAB_HD Acc* W(int64_t t) const { return p.W + (row + t) * p.M; }
  FWLAB_HD Acc* U(int64_t t) const { return p.U + (row + t) * p.D; }
  FWLAB_HD Acc* u(int64_t t) const { return p.u + (row + t) * p.D; }
  FWLAB_HD Acc* du(int64_t t) const { return p.du + (row + t) * p.D; }
  FWLAB_HD Acc kk(int64_t t, int64_t s) const {
    Acc sum = 0;
    for (int64_t j = 0; j < p.M; ++j) sum += k(t, j) * k(s, j);
    return sum;
  }
  FWLAB_HD Acc qk(int64_t t, int64_t s) const {
    Acc sum = 0;
    for (int64_t j = 0; j < p.M; ++j) sum += q(t, j) * k(s, j);
    return sum;
  }
  FWLAB_HD Acc dyu(int64_t t, int64_t s) const {
    Acc sum = 0;
    for (int64_t i = 0; i < p.D; ++i) sum += dy(t, i) * u(s)[i];
    return sum;
  }
  // Column c of [W | U] (c < M: W) at step t: the solve's unknowns.
  FWLAB_HD Acc& X(int64_t t, int64_t c) const { return c < p.M ? W(t)[c] : U(t)[c - p.M]; }
};

// (I + A) [W | U] = [beta e^g k | beta v] by forward substitution, A [kChunk, kChunk] and g ready. Column c of the
// unknowns reads only column c of earlier rows, so each thread solves its own columns alone: no barrier inside.
template <typename In, typename Acc>
FWLAB_HD void solve_chunk(const BlockCtx& ctx, const ChunkView<In, Acc>& c, const Acc* A) {
  const Problem<In, Acc>& p = c.p;
  for (int64_t col = ctx.tid; col < p.M + p.D; col += ctx.threads)
    for (int64_t t = 0; t < kChunk; ++t) {
      Acc x = col < p.M ? c.beta(t) * exp_acc(c.g(t)) * c.k(t, col) : c.beta(t) * c.v(t, col - p.M);
      for (int64_t s = 0; s < t; ++s) x -= A[t * kChunk + s] * c.X(s, col);
      c.X(t, col) = x;
    }
  ctx.sync();
}

// g (the chunk-local running sum of log alpha, zeros for the delta rule), then A_ts and the solve. Scratch: A
// [kChunk, kChunk].
template <typename In, typename Acc>
FWLAB_HD void prepare_chunk(const BlockCtx& ctx, const Problem<In, Acc>& p, int64_t h, int64_t n, Acc* A) {
  const ChunkView<In, Acc> c(p, h, n);
  if (ctx.tid == 0) {
    Acc run = 0;
    for (int64_t t = 0; t < kChunk; ++t) p.g[c.row + t] = run += p.log_alpha ? p.log_alpha[c.row + t] : Acc(0);
  }
  ctx.sync();
  for (int64_t e = ctx.tid; e < kChunk * kChunk; e += ctx.threads) {
    const int64_t t = e / kChunk, s = e % kChunk;
    A[e] = s < t ? c.beta(t) * c.kk(t, s) * c.decay(t, s) : Acc(0);
  }
  ctx.sync();
  solve_chunk(ctx, c, A);
}

// A state scan's scratch: its rows of S (or of dS) [kScanRows, M], then each step's e^{g_end - g_t} and e^{g_t}
// [kChunk] each, so that no inner loop takes an exponential.
template <typename Acc>
FWLAB_HD int64_t scan_scratch_bytes(int64_t M) {
  return (kScanRows * M + 2 * kChunk) * int64_t(sizeof(Acc));
}

// The chunk-start states of rows [row0, row0 + rows) of head h into states [heads, chunks + 1, D, M], and those
// rows of u. Scratch: scan_scratch_bytes, S first.
template <typename In, typename Acc>
FWLAB_HD void scan_forward(const BlockCtx& ctx, const Problem<In, Acc>& p, int64_t h, int64_t row0, int64_t rows,
                           Acc* states, Acc* S) {
  const int64_t M = p.M, N = p.chunks();
  Acc* to_end = S + kScanRows * M;
  for (int64_t e = ctx.tid; e < rows * M; e += ctx.threads)
    S[e] = p.state0 ? p.state0[(h * p.D + row0) * M + e] : Acc(0);
  ctx.sync();
  for (int64_t n = 0;; ++n) {
    for (int64_t e = ctx.tid; e < rows * M; e += ctx.threads) states[p.state_at(h, n) + row0 * M + e] = S[e];
    if (n == N) break;
    const ChunkView<In, Acc> c(p, h, n);
    for (int64_t e = ctx.tid; e < kChunk * rows; e += ctx.threads) {  // u_t = U_t - S W_t
      const int64_t t = e / rows, i = e % rows;
      Acc x = c.U(t)[row0 + i];
      for (int64_t j = 0; j < M; ++j) x -= S[i * M + j] * c.W(t)[j];
      c.u(t)[row0 + i] = x;
    }
    const Acc g_end = c.g(kChunk - 1);
    for (int64_t t = ctx.tid; t < kChunk; t += ctx.threads) to_end[t] = exp_acc(g_end - c.g(t));
    ctx.sync();
    for (int64_t e = ctx.tid; e < rows * M; e += ctx.threads) {  // S = e^{g_end} S + sum_t u_t (e^{g_end-g_t} k_t)^T
      const int64_t i = e / M, j = e % M;
      Acc x = exp_acc(g_end) * S[e];
      for (int64_t t = 0; t < kChunk; ++t) x += c.u(t)[row0 + i] * to_end[t] * c.k(t, j);
      S[e] = x;
    }
    ctx.sync();
  }
  ctx.sync();
}

// P_ts = (q_t . k_s) e_ts for s <= t, 0 above the diagonal, into P [kChunk, kChunk].
template <typename In, typename Acc>
FWLAB_HD void causal_scores(const BlockCtx& ctx, const ChunkView<In, Acc>& c, Acc* P) {
  for (int64_t e = ctx.tid; e < kChunk * kChunk; e += ctx.threads) {
    const int64_t t = e / kChunk, s = e % kChunk;
    P[e] = s <= t ? c.qk(t, s) * c.decay(t, s) : Acc(0);
  }
  ctx.sync();
}

// y of chunk n of head h (Acc [heads, steps, D]). Scratch: P [kChunk, kChunk].
template <typename In, typename Acc>
FWLAB_HD void chunk_outputs(const BlockCtx& ctx, const Problem<In, Acc>& p, int64_t h, int64_t n, const Acc* states,
                            Acc* y, Acc* P) {
  const ChunkView<In, Acc> c(p, h, n);
  causal_scores(ctx, c, P);
  const Acc* S = states + p.state_at(h, n);
  for (int64_t e = ctx.tid; e < kChunk * p.D; e += ctx.threads) {
    const int64_t t = e / p.D, i = e % p.D;
    Acc read = 0, pairs = 0;
    for (int64_t j = 0; j < p.M; ++j) read += S[i * p.M + j] * c.q(t, j);
    for (int64_t s = 0; s <= t; ++s) pairs += P[t * kChunk + s] * c.u(s)[i];
    y[(c.row + t) * p.D + i] = exp_acc(c.g(t)) * read + pairs;
  }
  ctx.sync();
}

// du's state-independent part, P^T dy: du_t = sum_{s>=t} P_st dy_s. Scratch: P [kChunk, kChunk].
template <typename In, typename Acc>
FWLAB_HD void chunk_du_pairs(const BlockCtx& ctx, const Problem<In, Acc>& p, int64_t h, int64_t n, Acc* P) {
  const ChunkView<In, Acc> c(p, h, n);
  causal_scores(ctx, c, P);
  for (int64_t e = ctx.tid; e < kChunk * p.D; e += ctx.threads) {
    const int64_t t = e / p.D, i = e % p.D;
    Acc x = 0;
    for (int64_t s = t; s < kChunk; ++s) x += P[s * kChunk + t] * c.dy(s, i);
    c.du(t)[i] = x;
  }
  ctx.sync();
}

// The gradients of the chunk-start states, rows [row0, row0 + rows) of head h, into dstates [heads, chunks + 1, D, M]
// (dstates[h, 0]: the gradient of state0), from dstate_final backwards; du gets the state's share:
//   du_t += H (e^{g_end - g_t} k_t),   dS_n = e^{g_end} H + sum_t (e^{g_t} dy_t q_t^T - du_t W_t^T),  H = dS_{n+1}.
// Scratch: scan_scratch_bytes, H first.
template <typename In, typename Acc>
FWLAB_HD void scan_reverse(const BlockCtx& ctx, const Problem<In, Acc>& p, int64_t h, int64_t row0, int64_t rows,
                           Acc* dstates, Acc* H) {
  const int64_t M = p.M, N = p.chunks();
  Acc *to_end = H + kScanRows * M, *gate = to_end + kChunk;
  for (int64_t e = ctx.tid; e < rows * M; e += ctx.threads)
    H[e] = p.dstate_final ? p.dstate_final[(h * p.D + row0) * M + e] : Acc(0);
  ctx.sync();
  for (int64_t n = N;; --n) {
    for (int64_t e = ctx.tid; e < rows * M; e += ctx.threads) dstates[p.state_at(h, n) + row0 * M + e] = H[e];
    if (n == 0) break;
    const ChunkView<In, Acc> c(p, h, n - 1);
    const Acc g_end = c.g(kChunk - 1);
    for (int64_t t = ctx.tid; t < kChunk; t += ctx.threads)
      to_end[t] = exp_acc(g_end - c.g(t)), gate[t] = exp_acc(c.g(t));
    ctx.sync();
    for (int64_t e = ctx.tid; e < kChunk * rows; e += ctx.threads) {
      const int64_t t = e / rows, i = e % rows;
      Acc x = 0;
      for (int64_t j = 0; j < M; ++j) x += H[i * M + j] * c.k(t, j);
      c.du(t)[row0 + i] += to_end[t] * x;
    }
    ctx.sync();
    for (int64_t e = ctx.tid; e < rows * M; e += ctx.threads) {
      const int64_t i = e / M, j = e % M;
      Acc x = exp_acc(g_end) * H[e];
      for (int64_t t = 0; t < kChunk; ++t) x += gate[t] * c.dy(t, row0 + i) * c.q(t, j) - c.du(t)[row0 + i] * c.W(t)[j];
      H[e] = x;
    }
    ctx.sync();
  }
  ctx.sync();
}

}  // namespace fwlab::cuda::delta

#include "kernels/delta/cuda/chunk_gradients.h"

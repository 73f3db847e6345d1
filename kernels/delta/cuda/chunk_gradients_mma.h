// The delta family's gradient program per chunk with its products on tensor cores: the results of chunk_gradients
// (kernels/delta/cuda/chunk_gradients.h has the formulas) from ten block_mma products (kernels/cuda/warp_mma.h) and the
// blocked solve of chunks_mma.h. The plain program sums the pair terms of d beta and dg element by element, recomputing
// k_t . k_r and q_t . k_r for each pair; here they come from the rows of four products that dq and dk need anyway:
//   PK = DP K,  PQ = DP^T Q,  AK = dA K,  AbK = dA^T (beta K)   (DP_tr = (dy_t . u_r) e_tr, dA in the A slot)
//   dq_t  = e^{g_t} (dy S_n)_t + PK_t
//   dk_t  = e^{g_end - g_t} (u H)_t + beta_t e^{g_t} dR^W_t + PQ_t + beta_t AK_t + AbK_t
//   dbeta_t = e^{g_t} k_t . dR^W_t + v_t . dR^U_t + k_t . AK_t
//   dg_t  = [the state terms of chunk_gradients] + beta_t k_t . AK_t + q_t . PK_t - k_t . PQ_t - k_t . AbK_t
// (the diagonal pair's terms of q_t . PK_t and k_t . PQ_t cancel, as they do in the plain sums). dq and dk build up
// in their output rows, each element owned by one lane of one warp in every product, so no two threads add to it.
#pragma once

#include "kernels/delta/cuda/chunks_mma.h"

namespace fwlab::cuda::delta {

// A and DP [kChunk, kChunk]; T: dR [kChunk, M + D], later one of the four pair products [kChunk, M] at a time;
// dg, db and part [kChunk]. Smaller than GradScratch: dy S_n and u H live in dq's and dk's rows.
template <typename Acc>
struct GradScratchMma {
  Acc *A, *DP, *T, *dg, *db, *part;
  FWLAB_HD static int64_t bytes(int64_t D, int64_t M) {
    return (2 * kChunk * kChunk + kChunk * (M + D) + 3 * kChunk) * int64_t(sizeof(Acc));
  }
  FWLAB_HD static GradScratchMma carve(void* base, int64_t D, int64_t M) {
    GradScratchMma s;
    s.A = static_cast<Acc*>(base), s.DP = s.A + kChunk * kChunk, s.T = s.DP + kChunk * kChunk;
    s.dg = s.T + kChunk * (M + D), s.db = s.dg + kChunk, s.part = s.db + kChunk;
    return s;
  }
};

// A state-sized matrix [D, M] as a product's operand, zeros past its edges.
template <typename Acc>
struct StateOperand {
  const Acc* X;
  int64_t D, M;
  FWLAB_HD Acc operator()(int64_t i, int64_t j) const { return i < D && j < M ? X[i * M + j] : Acc(0); }
};

// A = beta (K K^T) e below the diagonal, DP = (dy U^T) e on and below it; dq's rows <- dy S_n, dk's <- u H.
template <typename In, typename Acc>
FWLAB_HD void gradient_pairs_mma(const BlockCtx& ctx, const MmaOperands<In, Acc>& o, const Acc* S, const Acc* H,
                                 const GradScratchMma<Acc>& s, const Gradients<Acc>& out) {
  const ChunkView<In, Acc>& c = o.c;
  const int64_t M = c.p.M, D = c.p.D, depth_D = round16(D);
  auto k = [&](int64_t t, int64_t j) { return o.k(t, j); };
  auto k_t = [&](int64_t j, int64_t r) { return o.k(r, j); };
  auto dy = [&](int64_t t, int64_t i) { return o.dy(t, i); };
  auto u = [&](int64_t t, int64_t i) { return o.u(t, i); };
  block_mma<In, Acc>(
      ctx, kChunk, kChunk, k, k_t,
      [&](int64_t t, int64_t r, Acc kk) { s.A[t * kChunk + r] = r < t ? c.beta(t) * kk * c.decay(t, r) : Acc(0); },
      OnOrBelowDiagonal{o.depth_M()});
  block_mma<In, Acc>(
      ctx, kChunk, kChunk, dy, [&](int64_t i, int64_t r) { return o.u(r, i); },
      [&](int64_t t, int64_t r, Acc x) { s.DP[t * kChunk + r] = r <= t ? x * c.decay(t, r) : Acc(0); },
      OnOrBelowDiagonal{depth_D});
  block_mma<In, Acc>(ctx, kChunk, M, depth_D, dy, StateOperand<Acc>{S, D, M},
                     [&](int64_t t, int64_t j, Acc x) { out.dq[(c.row + t) * M + j] = x; });
  block_mma<In, Acc>(ctx, kChunk, M, depth_D, u, StateOperand<Acc>{H, D, M},
                     [&](int64_t t, int64_t j, Acc x) { out.dk[(c.row + t) * M + j] = x; });
  ctx.sync();
}

// dR = (I + A)^{-T} [-du S_n | du] by the blocked solve in T, then dA e in A's place.
template <typename In, typename Acc>
FWLAB_HD void solve_gradients_mma(const BlockCtx& ctx, const MmaOperands<In, Acc>& o, const Acc* S,
                                  const GradScratchMma<Acc>& s) {
  const ChunkView<In, Acc>& c = o.c;
  const int64_t M = c.p.M, D = c.p.D, width = M + D;
  auto du = [&](int64_t t, int64_t i) { return i < D ? c.du(t)[i] : Acc(0); };
  block_mma<In, Acc>(ctx, kChunk, M, round16(D), du, StateOperand<Acc>{S, D, M},
                     [&](int64_t t, int64_t j, Acc x) { s.T[t * width + j] = -x; });
  for (int64_t e = ctx.tid; e < kChunk * D; e += ctx.threads) s.T[e / D * width + M + e % D] = c.du(e / D)[e % D];
  ctx.sync();
  block_solve_mma<true, In>(ctx, s.A, width, [&](int64_t t, int64_t col) -> Acc& { return s.T[t * width + col]; });
  block_mma<In, Acc>(
      ctx, kChunk, kChunk, [&](int64_t t, int64_t col) { return col < width ? s.T[t * width + col] : Acc(0); },
      [&](int64_t col, int64_t r) { return col < width ? c.X(r, col) : Acc(0); },
      [&](int64_t t, int64_t r, Acc x) { s.A[t * kChunk + r] = r < t ? -x * c.decay(t, r) : Acc(0); },
      OnOrBelowDiagonal{round16(width)});
  ctx.sync();
}

// Each step's state and dR terms: dq and dk rows scaled (e^g dy S_n; e^{g_end - g} u H + beta e^g dR^W), dv, the
// dR and state parts of d beta and dg, and part[t], step t's share of dg_end.
template <typename In, typename Acc>
FWLAB_HD void step_terms_mma(const BlockCtx& ctx, const ChunkView<In, Acc>& c, const Acc* S, const Acc* H,
                             const GradScratchMma<Acc>& s, const Gradients<Acc>& out) {
  const int64_t M = c.p.M, D = c.p.D, width = M + D, end = kChunk - 1;
  for (int64_t t = ctx.tid; t < kChunk; t += ctx.threads) {
    const Acc gate = exp_acc(c.g(t)), to_end = exp_acc(c.g(end) - c.g(t));
    Acc *dq = out.dq + (c.row + t) * M, *dk = out.dk + (c.row + t) * M;
    const Acc* dR = s.T + t * width;
    Acc k_dRw = 0, v_dRu = 0, q_dyS = 0, k_dK = 0;
    for (int64_t j = 0; j < M; ++j) {
      k_dRw += c.k(t, j) * dR[j], q_dyS += c.q(t, j) * dq[j], k_dK += c.k(t, j) * dk[j];
      dq[j] = gate * dq[j], dk[j] = to_end * dk[j] + c.beta(t) * gate * dR[j];
    }
    for (int64_t i = 0; i < D; ++i) {
      v_dRu += c.v(t, i) * dR[M + i];
      out.dv[(c.row + t) * D + i] = c.beta(t) * dR[M + i];
    }
    s.db[t] = gate * k_dRw + v_dRu;
    s.dg[t] = gate * q_dyS - to_end * k_dK + c.beta(t) * gate * k_dRw;
    Acc state = 0;  // rows t, t + kChunk, ... of S_n . H: step t's share of e^{-g_end} d g_end's state term
    for (int64_t i = t; i < D; i += kChunk)
      for (int64_t j = 0; j < M; ++j) state += S[i * M + j] * H[i * M + j];
    s.part[t] = to_end * k_dK + exp_acc(c.g(end)) * state;
  }
  ctx.sync();
}

// One pair product C [kChunk, M] into T and added to dq or dk by `add(t, j, x)`, then each step's
// rows(t, q_t . C_t, k_t . C_t) for d beta and dg.
template <typename In, typename Acc, typename AAt, typename BAt, typename Range, typename Add, typename Rows>
FWLAB_HD void pair_product_mma(const BlockCtx& ctx, const ChunkView<In, Acc>& c, const GradScratchMma<Acc>& s,
                               const AAt& a, const BAt& b, const Range& range, const Add& add, const Rows& rows) {
  const int64_t M = c.p.M;
  block_mma<In, Acc>(
      ctx, kChunk, M, a, b,
      [&](int64_t t, int64_t j, Acc x) {
        s.T[t * M + j] = x;
        add(t, j, x);
      },
      range);
  ctx.sync();
  for (int64_t t = ctx.tid; t < kChunk; t += ctx.threads) {
    Acc q_dot = 0, k_dot = 0;
    for (int64_t j = 0; j < M; ++j) q_dot += c.q(t, j) * s.T[t * M + j], k_dot += c.k(t, j) * s.T[t * M + j];
    rows(t, q_dot, k_dot);
  }
  ctx.sync();
}

// The four pair products and their shares of dq, dk, d beta and dg.
template <typename In, typename Acc>
FWLAB_HD void pair_terms_mma(const BlockCtx& ctx, const MmaOperands<In, Acc>& o, const GradScratchMma<Acc>& s,
                             const Gradients<Acc>& out) {
  const ChunkView<In, Acc>& c = o.c;
  const int64_t M = c.p.M;
  Acc *dq = out.dq + c.row * M, *dk = out.dk + c.row * M;
  auto pairs = [](const Acc* X, bool transposed) {  // a [kChunk, kChunk] scratch matrix as the left operand
    return [=](int64_t t, int64_t r) { return transposed ? X[r * kChunk + t] : X[t * kChunk + r]; };
  };
  auto q = [&](int64_t r, int64_t j) { return o.q(r, j); };
  auto k = [&](int64_t r, int64_t j) { return o.k(r, j); };
  auto beta_k = [&](int64_t r, int64_t j) { return c.beta(r) * convert<Acc>(o.k(r, j)); };
  pair_product_mma<In>(  // PK
      ctx, c, s, pairs(s.DP, false), k, UpToRow{}, [&](int64_t t, int64_t j, Acc x) { dq[t * M + j] += x; },
      [&](int64_t t, Acc q_dot, Acc) { s.dg[t] += q_dot; });
  pair_product_mma<In>(  // PQ
      ctx, c, s, pairs(s.DP, true), q, FromRow{}, [&](int64_t t, int64_t j, Acc x) { dk[t * M + j] += x; },
      [&](int64_t t, Acc, Acc k_dot) { s.dg[t] -= k_dot; });
  pair_product_mma<In>(  // AK
      ctx, c, s, pairs(s.A, false), k, UpToRow{}, [&](int64_t t, int64_t j, Acc x) { dk[t * M + j] += c.beta(t) * x; },
      [&](int64_t t, Acc, Acc k_dot) { s.db[t] += k_dot, s.dg[t] += c.beta(t) * k_dot; });
  pair_product_mma<In>(  // AbK
      ctx, c, s, pairs(s.A, true), beta_k, FromRow{}, [&](int64_t t, int64_t j, Acc x) { dk[t * M + j] += x; },
      [&](int64_t t, Acc, Acc k_dot) { s.dg[t] -= k_dot; });
}

// Every gradient of chunk n of head h, as chunk_gradients writes them. Scratch: GradScratchMma.
template <typename In, typename Acc>
FWLAB_HD void chunk_gradients_mma(const BlockCtx& ctx, const Problem<In, Acc>& p, int64_t h, int64_t n,
                                  const Acc* states, const Acc* dstates, const Gradients<Acc>& out,
                                  const GradScratchMma<Acc>& s) {
  const ChunkView<In, Acc> c(p, h, n);
  const MmaOperands<In, Acc> o{c};
  const Acc *S = states + p.state_at(h, n), *H = dstates + p.state_at(h, n + 1);
  gradient_pairs_mma(ctx, o, S, H, s, out);
  solve_gradients_mma(ctx, o, S, s);
  step_terms_mma(ctx, c, S, H, s, out);
  pair_terms_mma(ctx, o, s, out);
  for (int64_t t = ctx.tid; t < kChunk; t += ctx.threads) out.dbeta[c.row + t] = s.db[t];
  log_gate_gradients(ctx, c, s, out.dlog_alpha);
}

}  // namespace fwlab::cuda::delta

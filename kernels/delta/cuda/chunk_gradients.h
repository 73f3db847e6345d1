// The delta family's gradient program per chunk (kernels/delta/cuda/chunks.h has the forward and the notation). Given
// the chunk-start state S_n, the gradient H of the next one, u, du (complete after the reverse scan) and [W | U]:
//   dq_t = e^{g_t} S_n^T dy_t + sum_{s<=t} (dy_t . u_s) e_ts k_s
//   dR   = (I + A)^{-T} [dW | dU],  dW_t = -S_n^T du_t, dU_t = du_t   (back substitution, column by column)
//   dA_ts = -(dR_t . [W_s | U_s])  (s < t)
//   dk_t = sum_{s>=t} (dy_s . u_t) e_st q_s + e^{g_end - g_t} H^T u_t + beta_t e^{g_t} dR^W_t
//          + sum_{s<t} dA_ts beta_t e_ts k_s + sum_{s>t} dA_st beta_s e_st k_s
//   dv_t = beta_t dR^U_t,   dbeta_t = e^{g_t} k_t . dR^W_t + v_t . dR^U_t + sum_{s<t} dA_ts (k_t . k_s) e_ts
// and dg_t, the gradient of each running log-gate sum, from every factor e^{g} appears in; d log alpha_r is
// sum_{t>=r} dg_t within the chunk (g runs from the chunk's start, so nothing crosses chunks).
#pragma once

namespace fwlab::cuda::delta {

// The gradient program's scratch: A (then dA e) and DP e = (dy_t . u_s) e_ts [kChunk, kChunk], each pair's decay
// applied once so that no inner loop below takes an exponential; dyS = dy S_n and dK = u H [kChunk, M]; dR
// [kChunk, M + D]; dg and a reduction row [kChunk]. P = (q_t . k_s) e_ts is recomputed where it is read
// (step_gradients) rather than kept: fp32 at D = M = 128 then fits an A100's 163 KiB of shared memory.
template <typename Acc>
struct GradScratch {
  Acc *A, *DP, *dyS, *dK, *dR, *dg, *part;
  FWLAB_HD static int64_t bytes(int64_t D, int64_t M) {
    return (2 * kChunk * kChunk + 3 * kChunk * M + kChunk * D + 2 * kChunk) * int64_t(sizeof(Acc));
  }
  FWLAB_HD static GradScratch carve(void* base, int64_t D, int64_t M) {
    GradScratch s;
    s.A = static_cast<Acc*>(base), s.DP = s.A + kChunk * kChunk;
    s.dyS = s.DP + kChunk * kChunk, s.dK = s.dyS + kChunk * M, s.dR = s.dK + kChunk * M;
    s.dg = s.dR + kChunk * (M + D), s.part = s.dg + kChunk;
    return s;
  }
};

// The pair matrices and the two state products, all independent of one another.
template <typename In, typename Acc>
FWLAB_HD void gradient_pairs(const BlockCtx& ctx, const ChunkView<In, Acc>& c, const Acc* S, const Acc* H,
                             const GradScratch<Acc>& s) {
  const int64_t M = c.p.M, D = c.p.D;
  for (int64_t e = ctx.tid; e < kChunk * kChunk; e += ctx.threads) {
    const int64_t t = e / kChunk, r = e % kChunk;
    s.A[e] = r < t ? c.beta(t) * c.kk(t, r) * c.decay(t, r) : Acc(0);
    s.DP[e] = r <= t ? c.dyu(t, r) * c.decay(t, r) : Acc(0);
  }
  for (int64_t e = ctx.tid; e < kChunk * M; e += ctx.threads) {
    const int64_t t = e / M, j = e % M;
    Acc dys = 0, dk = 0;
    for (int64_t i = 0; i < D; ++i) dys += c.dy(t, i) * S[i * M + j], dk += c.u(t)[i] * H[i * M + j];
    s.dyS[e] = dys, s.dK[e] = dk;
  }
  ctx.sync();
}

// dR by back substitution (column c of dR reads only column c of later rows: no barrier inside), then dA e_ts in A's
// place.
template <typename In, typename Acc>
FWLAB_HD void solve_gradients(const BlockCtx& ctx, const ChunkView<In, Acc>& c, const Acc* S,
                              const GradScratch<Acc>& s) {
  const int64_t M = c.p.M, D = c.p.D, width = M + D;
  for (int64_t col = ctx.tid; col < width; col += ctx.threads)
    for (int64_t t = kChunk - 1; t >= 0; --t) {
      Acc x = 0;
      if (col < M)
        for (int64_t i = 0; i < D; ++i) x -= c.du(t)[i] * S[i * M + col];
      else
        x = c.du(t)[col - M];
      for (int64_t r = t + 1; r < kChunk; ++r) x -= s.A[r * kChunk + t] * s.dR[r * width + col];
      s.dR[t * width + col] = x;
    }
  ctx.sync();
  for (int64_t e = ctx.tid; e < kChunk * kChunk; e += ctx.threads) {
    const int64_t t = e / kChunk, r = e % kChunk;
    Acc x = 0;
    if (r < t)
      for (int64_t col = 0; col < width; ++col) x -= s.dR[t * width + col] * c.X(r, col);
    s.A[e] = r < t ? x * c.decay(t, r) : Acc(0);
  }
  ctx.sync();
}

// d beta_t (written out) and dg_t (into scratch) for each step t; part[t] holds step t's share of dg_end.
template <typename In, typename Acc>
FWLAB_HD void step_gradients(const BlockCtx& ctx, const ChunkView<In, Acc>& c, const Acc* S, const Acc* H,
                             const GradScratch<Acc>& s, Acc* dbeta) {
  const int64_t M = c.p.M, D = c.p.D, width = M + D, end = kChunk - 1;
  for (int64_t t = ctx.tid; t < kChunk; t += ctx.threads) {
    const Acc gate = exp_acc(c.g(t)), to_end = exp_acc(c.g(end) - c.g(t));
    Acc k_dRw = 0, v_dRu = 0, q_dyS = 0, k_dK = 0;
    for (int64_t j = 0; j < M; ++j)
      k_dRw += c.k(t, j) * s.dR[t * width + j], q_dyS += c.q(t, j) * s.dyS[t * M + j],
          k_dK += c.k(t, j) * s.dK[t * M + j];
    for (int64_t i = 0; i < D; ++i) v_dRu += c.v(t, i) * s.dR[t * width + M + i];
    Acc db = gate * k_dRw + v_dRu, dg = gate * q_dyS - to_end * k_dK + c.beta(t) * gate * k_dRw;
    for (int64_t r = 0; r < t; ++r) {  // pairs (t, r): t the later step
      const Acc b = s.A[t * kChunk + r] * c.kk(t, r);
      db += b, dg += c.beta(t) * b + s.DP[t * kChunk + r] * c.qk(t, r);
    }
    for (int64_t r = t + 1; r < kChunk; ++r)  // pairs (r, t): t the earlier step
      dg -= c.beta(r) * s.A[r * kChunk + t] * c.kk(r, t) + s.DP[r * kChunk + t] * c.qk(r, t);
    dbeta[c.row + t] = db;
    s.dg[t] = dg;
    Acc state = 0;  // rows t, t + kChunk, ... of S_n . H: step t's share of e^{-g_end} d g_end's state term
    for (int64_t i = t; i < D; i += kChunk)
      for (int64_t j = 0; j < M; ++j) state += S[i * M + j] * H[i * M + j];
    s.part[t] = to_end * k_dK + exp_acc(c.g(end)) * state;
  }
  ctx.sync();
}

// d log alpha_r = sum_{t>=r} dg_t, g_end's own gradient added at the last step.
template <typename In, typename Acc, typename Scratch>  // GradScratch or GradScratchMma: dg and part
FWLAB_HD void log_gate_gradients(const BlockCtx& ctx, const ChunkView<In, Acc>& c, const Scratch& s, Acc* dlog_alpha) {
  if (ctx.tid == 0 && dlog_alpha) {
    Acc run = 0;
    for (int64_t t = 0; t < kChunk; ++t) run += s.part[t];
    for (int64_t t = kChunk - 1; t >= 0; --t) dlog_alpha[c.row + t] = run += s.dg[t];
  }
  ctx.sync();
}

// dq, dk, dv of every step of the chunk.
template <typename In, typename Acc>
FWLAB_HD void input_gradients(const BlockCtx& ctx, const ChunkView<In, Acc>& c, const GradScratch<Acc>& s,
                              const Gradients<Acc>& out) {
  const int64_t M = c.p.M, D = c.p.D, width = M + D, end = kChunk - 1;
  for (int64_t e = ctx.tid; e < kChunk * M; e += ctx.threads) {
    const int64_t t = e / M, j = e % M;
    Acc dq = exp_acc(c.g(t)) * s.dyS[e];
    Acc dk = exp_acc(c.g(end) - c.g(t)) * s.dK[e] + c.beta(t) * exp_acc(c.g(t)) * s.dR[t * width + j];
    for (int64_t r = 0; r <= t; ++r) dq += s.DP[t * kChunk + r] * c.k(r, j);
    for (int64_t r = t; r < kChunk; ++r) dk += s.DP[r * kChunk + t] * c.q(r, j);
    for (int64_t r = 0; r < t; ++r) dk += s.A[t * kChunk + r] * c.beta(t) * c.k(r, j);
    for (int64_t r = t + 1; r < kChunk; ++r) dk += s.A[r * kChunk + t] * c.beta(r) * c.k(r, j);
    out.dq[(c.row + t) * M + j] = dq;
    out.dk[(c.row + t) * M + j] = dk;
  }
  for (int64_t e = ctx.tid; e < kChunk * D; e += ctx.threads) {
    const int64_t t = e / D, i = e % D;
    out.dv[(c.row + t) * D + i] = c.beta(t) * s.dR[t * width + M + i];
  }
  ctx.sync();
}

// Every gradient of chunk n of head h; states and dstates from the two scans, u and du complete.
template <typename In, typename Acc>
FWLAB_HD void chunk_gradients(const BlockCtx& ctx, const Problem<In, Acc>& p, int64_t h, int64_t n, const Acc* states,
                              const Acc* dstates, const Gradients<Acc>& out, const GradScratch<Acc>& s) {
  const ChunkView<In, Acc> c(p, h, n);
  const Acc *S = states + p.state_at(h, n), *H = dstates + p.state_at(h, n + 1);
  gradient_pairs(ctx, c, S, H, s);
  solve_gradients(ctx, c, S, s);
  step_gradients(ctx, c, S, H, s, out.dbeta);
  log_gate_gradients(ctx, c, s, out.dlog_alpha);
  input_gradients(ctx, c, s, out);
}

}  // namespace fwlab::cuda::delta

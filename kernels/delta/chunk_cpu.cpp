// Chunked CPU kernel of the delta rule and the gated delta rule: the WY form of chunk_libtorch.cpp (which states
// the algebra) as raw loops around small matrix products (kernels/common/small_gemm_cpu.h), one (batch, head) at a time
// to each thread of the ATen pool (kernels/common/head_queue.h), with its own backward. Per chunk of c <= C steps, with
// the state S transposed ([M, D]: o = S^T q):
//   prepare:  g = cumsum log alpha, Gamma_ts = e^{g_t - g_s} = alpha_{s+1} ... alpha_t (s <= t, a product: no exp),
//             L = strict(K K^T . Gamma), A = diag(beta) L, P = (Q K^T) . Gamma,
//             Tinv = (I + A)^-1 by forward substitution (the UT transform of fla's chunk kernels),
//             X = [W U] = Tinv [diag(beta e^g) K, diag(beta) V]
//   scan:     u = U - W S,  O = diag(e^g) Q S + P u,  S <- e^{g_c} S + (diag(e^{g_c - g}) K)^T u
// The forward keeps each chunk's starting state (T / C states per head), X (T x (M + D)), u (T x D) and each chunk's
// Tinv, L and P (3 C^2): the backward recomputes only the elementwise gates, walks the scan back, then the
// preparation:
//   du = P^T dO + Kw dS,  dP = dO u^T,  dQr = dO S^T,  dKw = u dS^T,  dX = [-du S^T, du],
//   dS <- e^{g_c} dS + Qr^T dO - W^T du,  dR = Tinv^T dX = [-z S^T, z] with z = Tinv^T du,  dA = -strict(dR X^T),
// and the elementwise rules of each product (pair_grads, gate_grads). No gate (the delta rule) is g = 0: Q and K
// are then used in place of Qr and Kw. The backward's products with S^T and dS^T take the transposed matrices
// (transposed once a chunk: kernels/common/transpose_cpu.h) because the BLAS's small A B^T products run at half the
// speed of its A B ones (1.8 against 0.8 us at 16 x 64 x 64 on the AVX-512 machine these were measured on), and the
// AVX2 tiles read B^T only through a transposed copy, made once a chunk here rather than once a product. The forward
// keeps S itself: a transposing store into the kept buffer cost the forward 12 %, more than a plain copy.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/common/cpu_blas.h"
#include "kernels/common/head_queue.h"
#include "kernels/common/lane_dot.h"
#include "kernels/common/lookahead.h"
#include "kernels/delta/delta.h"
#include "kernels/common/small_gemm_cpu.h"
#include "kernels/common/transpose_cpu.h"
#include "kernels/common/vector_clones.h"

namespace fwlab::kernels {

// Named, not anonymous: the fused kernels' files have helpers of the same names, and a unity build joins them.
namespace wy_chunks {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// One head: q, k [T, M]; v [T, D]; alpha (null: the delta rule), beta [T].
template <typename T>
struct Head {
  const T *q, *k, *v, *alpha, *beta;
  int64_t steps, M, D, C;
};

// What the forward keeps of one head: chunk-start states [chunks, M, D], X [T, M + D], u [T, D],
// [Tinv L P] [chunks, 3 C^2].
template <typename T>
struct Kept {
  T *starts, *solved, *values, *pairs;
};

// One chunk: its gates and scratch (sized for the longest chunk), and where its X, u, Tinv, L and P live.
template <typename T>
struct Chunk {
  int64_t t0 = 0, c = 0, C, M, D, MD;
  // Gam: Gamma (C x C), zero above the diagonal; KQ: the chunk's rows of K, then of Q; KQK = KQ K^T: K K^T, then Q K^T
  std::vector<T> g, gam, Gam, KQ, KQK, R, Qr, Kw;
  const T *qr = nullptr, *kw = nullptr;  // Qr and Kw: their scratch, or Q and K where no gate scales them
  bool gated = false;
  mutable Lookahead ahead;  // the backward's: the previous chunk's rows
  T *X = nullptr, *u = nullptr, *Tinv = nullptr, *L = nullptr, *P = nullptr;
  Chunk(int64_t C_, int64_t M_, int64_t D_)
      : C(C_),
        M(M_),
        D(D_),
        MD(M_ + D_),
        g(C_),
        gam(C_),
        Gam(C_ * C_),
        KQ(2 * C_ * M_),
        KQK(2 * C_ * C_),
        R(C_ * (M_ + D_)),
        Qr(C_ * M_),
        Kw(C_ * M_) {}
  T decay(int64_t t, int64_t s) const { return Gam[t * C + s]; }
  T gate() const { return gam[c - 1]; }
  // Chunk n's share of the kept buffers.
  void place(const Kept<T>& kept, int64_t n) {
    X = kept.solved + t0 * MD, u = kept.values + t0 * D;
    Tinv = kept.pairs + n * 3 * C * C, L = Tinv + C * C, P = L + C * C;
  }
};

// small_gemm, then a share of the lines the backward's next chunk will need (kernels/common/lookahead.h; the forward
// walks the chunks in the hardware prefetchers' direction, and fetching its next chunk ahead measured no faster).
template <typename T, typename... Args>
FWLAB_HOT void product(const Chunk<T>& w, Args... args) {
  small_gemm<T>(args...);
  w.ahead.fetch(32);
}

// alpha as the kernels read it: at least the smallest normal float, so that its log is finite.
template <typename T>
FWLAB_HOT T gate_at(const T* alpha, int64_t t) {
  return alpha ? std::max(alpha[t], static_cast<T>(std::numeric_limits<float>::min())) : T(1);
}

// g, e^g, Gamma (running products of the gates), and Q, K scaled by them: what forward and backward both need.
template <typename T>
FWLAB_HOT void prepare_gates(const Head<T>& h, int64_t t0, Chunk<T>& w) {
  w.t0 = t0, w.c = std::min(h.C, h.steps - t0);
  const int64_t c = w.c, M = h.M, C = w.C;
  for (int64_t t = 0; t < c; ++t) {
    const T a = gate_at(h.alpha, t0 + t);
    w.g[t] = (t ? w.g[t - 1] : T(0)) + (h.alpha ? std::log(a) : T(0));
    w.gam[t] = std::exp(w.g[t]);
    T* row = w.Gam.data() + t * C;
    for (int64_t s = 0; s < t; ++s) row[s] = w.Gam[(t - 1) * C + s] * a;
    row[t] = 1;
    std::fill(row + t + 1, row + c, T(0));
  }
  const T *Q = h.q + t0 * M, *K = h.k + t0 * M;
  std::copy(K, K + c * M, w.KQ.data()), std::copy(Q, Q + c * M, w.KQ.data() + c * M);
  w.gated = h.alpha != nullptr;
  w.qr = w.gated ? w.Qr.data() : Q, w.kw = w.gated ? w.Kw.data() : K;
  if (!w.gated) return;
  for (int64_t t = 0; t < c; ++t) {
    const T to_end = w.decay(c - 1, t);
    for (int64_t j = 0; j < M; ++j) w.Qr[t * M + j] = w.gam[t] * Q[t * M + j], w.Kw[t * M + j] = to_end * K[t * M + j];
  }
}

// Tinv = (I + diag(beta) L)^-1, row by row: Tinv_t = e_t - sum over r < t of beta_t L_tr Tinv_r. Whole rows of C
// (Tinv_r is zero right of r): one vector operation each, where rows cut at r did not vectorise.
template <typename T>
FWLAB_HOT void invert_unit_lower(Chunk<T>& w, const T* beta) {
  const int64_t c = w.c, C = w.C;
  for (int64_t t = 0; t < c; ++t) {
    T* row = w.Tinv + t * C;
    std::fill(row, row + C, T(0));
    row[t] = 1;
    for (int64_t r = 0; r < t; ++r) {
      const T coef = -beta[t] * w.L[t * C + r];
      const T* other = w.Tinv + r * C;
      for (int64_t s = 0; s < C; ++s) row[s] += coef * other[s];
    }
  }
}

// The forward's preparation: L, P, Tinv and X, into the kept buffers.
template <typename T>
FWLAB_HOT void prepare(const Head<T>& h, Chunk<T>& w) {
  const int64_t c = w.c, M = h.M, D = h.D, C = w.C, MD = w.MD, t0 = w.t0;
  const T *K = h.k + t0 * M, *V = h.v + t0 * D, *beta = h.beta + t0;
  product(w, false, true, 2 * c, c, M, 1, w.KQ.data(), M, K, M, 0, w.KQK.data(), C);  // one product, not two
  const T *KK = w.KQK.data(), *QK = KK + c * C;
  for (int64_t t = 0; t < c; ++t)
    for (int64_t s = 0; s < C; ++s) {
      const T gamma = s < c ? w.decay(t, s) : T(0);
      w.L[t * C + s] = s < t ? KK[t * C + s] * gamma : T(0);
      w.P[t * C + s] = s <= t ? QK[t * C + s] * gamma : T(0);
    }
  invert_unit_lower(w, beta);
  for (int64_t t = 0; t < c; ++t) {
    for (int64_t j = 0; j < M; ++j) w.R[t * MD + j] = beta[t] * w.gam[t] * K[t * M + j];
    for (int64_t i = 0; i < D; ++i) w.R[t * MD + M + i] = beta[t] * V[t * D + i];
  }
  product(w, false, false, c, MD, c, 1, w.Tinv, C, w.R.data(), MD, 0, w.X, MD);
}

// u = U - W S for the prepared chunk.
template <typename T>
FWLAB_HOT void new_values(Chunk<T>& w, const T* S) {
  for (int64_t t = 0; t < w.c; ++t)
    for (int64_t i = 0; i < w.D; ++i) w.u[t * w.D + i] = w.X[t * w.MD + w.M + i];
  product(w, false, false, w.c, w.D, w.M, -1, w.X, w.MD, S, w.D, 1, w.u, w.D);
}

// y rows of the chunk, and S advanced to its end.
template <typename T>
FWLAB_HOT void scan_forward(Chunk<T>& w, T* S, T* y) {
  const int64_t c = w.c, M = w.M, D = w.D;
  new_values(w, S);
  product(w, false, false, c, D, M, 1, w.qr, M, S, D, 0, y, D);
  product(w, false, false, c, D, c, 1, w.P, w.C, w.u, D, 1, y, D);
  product(w, true, false, M, D, c, 1, w.kw, M, w.u, D, w.gate(), S, D);  // the gate as beta: no pass of its own
}

// S: state0 [M, D] in, S_T out; y [T, D].
template <typename T>
FWLAB_HOT void forward_head(const Head<T>& h, T* S, T* y, const Kept<T>& kept) {
  Chunk<T> w(h.C, h.M, h.D);
  const int64_t MD = h.M * h.D;
  for (int64_t t0 = 0, n = 0; t0 < h.steps; t0 += h.C, ++n) {
    std::copy(S, S + MD, kept.starts + n * MD);
    prepare_gates(h, t0, w);
    w.place(kept, n);
    prepare(h, w);
    scan_forward(w, S, y + t0 * h.D);
  }
}

template <typename T>
struct Grads {  // one head's; dy is never null (zeros where no gradient reached y)
  const T* dy;
  T *dq, *dk, *dv, *dalpha, *dbeta;
};

// A chunk's gradients and scratch: the scan's (dP, dQr, dKw, du, dgate, S^T, dS^T), dR = Tinv^T dX and the
// preparation's (dg, E: the gradient of K K^T, dQK). dqr: where dQr goes (its scratch, or dq where no gate
// scales Q).
template <typename T>
struct ScanGrads {
  std::vector<T> dR, dP, dQr, dKw, du, St, dSt, dg, E, dQK, EQ;
  T* dqr = nullptr;
  T dgate = 0;
  ScanGrads(int64_t C, int64_t M, int64_t D)
      : dR(C * (M + D)),
        dP(C * C),
        dQr(C * M),
        dKw(C * M),
        du(C * D),
        St(M * D),
        dSt(M * D),
        dg(C),
        E(C * C),
        dQK(C * C),
        EQ(2 * C * C) {}
};

// The chunk's scan walked back: dS holds the gradient of its end state on entry and of its start on exit.
template <typename T>
FWLAB_HOT void scan_backward(const Chunk<T>& w, const T* S, const T* dO, T* dS, ScanGrads<T>& d) {
  const int64_t c = w.c, M = w.M, D = w.D, C = w.C, MD = w.MD;
  T *St = d.St.data(), *dSt = d.dSt.data();
  transpose_cpu(M, D, S, D, St, M);
  transpose_cpu(M, D, dS, D, dSt, M);
  product(w, true, false, c, D, c, 1, w.P, C, dO, D, 0, d.du.data(), D);
  product(w, false, false, c, D, M, 1, w.kw, M, dS, D, 1, d.du.data(), D);
  product(w, false, true, c, c, D, 1, dO, D, w.u, D, 0, d.dP.data(), C);
  product(w, false, false, c, M, D, 1, dO, D, St, M, 0, d.dqr, M);
  product(w, false, false, c, M, D, 1, w.u, D, dSt, M, 0, d.dKw.data(), M);
  T dgate = 0;
  if (w.gated) {  // <S, dS>, both transposed
#pragma omp simd reduction(+ : dgate)
    for (int64_t n = 0; n < M * D; ++n) dgate += St[n] * dSt[n];
  }
  d.dgate = dgate;
  product(w, true, false, M, D, c, 1, w.qr, M, dO, D, w.gate(), dS, D);
  product(w, true, false, M, D, c, -1, w.X, MD, d.du.data(), D, 1, dS, D);
}

// The gradients through R = [diag(beta e^g) K, diag(beta) V] (dR after the transposed solve): dk, dv and dbeta
// start here; dg gathers the gates' share.
template <typename T>
FWLAB_HOT void solve_grads(const Head<T>& h, const Chunk<T>& w, ScanGrads<T>& d, const Grads<T>& out) {
  const int64_t M = w.M, D = w.D, MD = w.MD;
  for (int64_t t = 0; t < w.c; ++t) {
    const int64_t r = w.t0 + t;
    const T b = h.beta[r], scale = b * w.gam[t], to_end = w.decay(w.c - 1, t);
    const T *K = h.k + r * M, *V = h.v + r * D, *__restrict dRk = d.dR.data() + t * MD, *__restrict dRv = dRk + M;
    const T* __restrict dKw = d.dKw.data() + t * M;
    T* __restrict dk = out.dk + r * M, * __restrict dv = out.dv + r * D;
    for (int64_t j = 0; j < M; ++j) dk[j] = scale * dRk[j] + to_end * dKw[j];
    for (int64_t i = 0; i < D; ++i) dv[i] = b * dRv[i];
    const T k_dR = lane_dot(K, dRk, M), v_dR = lane_dot(V, dRv, D);
    out.dbeta[r] = w.gam[t] * k_dR + v_dR;
    d.dg[t] = scale * k_dR;
  }
}

// The pairwise products: A (through dA = -strict(dR X^T)) and P. Leaves E (the gradient of K K^T) and dQK, and
// adds the pairs' share to dbeta and dg.
template <typename T>
FWLAB_HOT void pair_grads(const Head<T>& h, const Chunk<T>& w, ScanGrads<T>& d, T* dbeta) {
  const int64_t c = w.c, C = w.C, MD = w.MD;
  T *E = d.E.data(), *dg = d.dg.data();
  product(w, false, true, c, c, MD, -1, d.dR.data(), MD, w.X, MD, 0, E, C);  // dA, unmasked
  for (int64_t t = 0; t < c; ++t) {
    const T b = h.beta[w.t0 + t];
    for (int64_t s = 0; s < c; ++s) {
      const T gamma = w.decay(t, s), dA = s < t ? E[t * C + s] : T(0), dP = s <= t ? d.dP[t * C + s] : T(0);
      dbeta[t] += dA * w.L[t * C + s];
      E[t * C + s] = b * dA * gamma;
      d.dQK[t * C + s] = dP * gamma;
      const T rho = b * dA * w.L[t * C + s] + dP * w.P[t * C + s];  // dGamma_ts Gamma_ts
      dg[t] += rho, dg[s] -= rho;
    }
  }
}

template <typename T>
FWLAB_HOT void gate_grads(const Head<T>& h, const Chunk<T>& w, const ScanGrads<T>& d, T* dg, T* dalpha) {
  const int64_t c = w.c, M = w.M;
  T to_end = 0;
  for (int64_t t = 0; t < c; ++t) {
    T qr = 0, kw = 0;
#pragma omp simd reduction(+ : qr, kw)
    for (int64_t j = 0; j < M; ++j) qr += w.Qr[t * M + j] * d.dQr[t * M + j], kw += w.Kw[t * M + j] * d.dKw[t * M + j];
    dg[t] += qr - kw;
    to_end += kw;
  }
  dg[c - 1] += to_end + w.gate() * d.dgate;
  T suffix = 0;  // d log alpha_r = sum over t >= r of dg_t
  for (int64_t t = c - 1; t >= 0; --t) {
    suffix += dg[t];
    const T a = h.alpha[w.t0 + t];
    dalpha[w.t0 + t] = a >= static_cast<T>(std::numeric_limits<float>::min()) ? suffix / a : T(0);
  }
}

template <typename T>
FWLAB_HOT void backward_chunk(const Head<T>& h, Chunk<T>& w, const T* S, T* dS, ScanGrads<T>& d, const Grads<T>& out) {
  const int64_t c = w.c, M = w.M, D = w.D, C = w.C, MD = w.MD, t0 = w.t0;
  d.dqr = w.gated ? d.dQr.data() : out.dq + t0 * M;
  scan_backward(w, S, out.dy + t0 * w.D, dS, d);  // u as the forward kept it
  // dR = Tinv^T [-du S^T, du] as [-z S^T, z], z = Tinv^T du: a c x D x c product where Tinv^T dX was c x MD x c.
  T* dR = d.dR.data();
  product(w, true, false, c, D, c, 1, w.Tinv, C, d.du.data(), D, 0, dR + M, MD);
  product(w, false, false, c, M, D, -1, dR + M, MD, d.St.data(), M, 0, dR, MD);
  solve_grads(h, w, d, out);
  pair_grads(h, w, d, out.dbeta + t0);
  const T* K = h.k + t0 * M;
  T *dq = out.dq + t0 * M, *dk = out.dk + t0 * M;
  if (w.gated)
    for (int64_t t = 0; t < c; ++t)
      for (int64_t j = 0; j < M; ++j) dq[t * M + j] = w.gam[t] * d.dQr[t * M + j];
  product(w, false, false, c, M, c, 1, d.dQK.data(), C, K, M, 1, dq, M);
  // dk += (E + E^T) K + dQK^T Q as one product: [E + E^T, dQK^T] (E is strictly lower) times KQ's rows.
  T* EQ = d.EQ.data();
  for (int64_t t = 0; t < c; ++t)
    for (int64_t s = 0; s < c; ++s)
      EQ[t * 2 * C + s] = d.E[t * C + s] + d.E[s * C + t], EQ[t * 2 * C + c + s] = d.dQK[s * C + t];
  product(w, false, false, c, M, 2 * c, 1, EQ, 2 * C, w.KQ.data(), M, 1, dk, M);
  if (h.alpha) gate_grads(h, w, d, d.dg.data(), out.dalpha);
}

// What chunk n's backward reads, fetched while the chunk after it is worked on: the backward walks the chunks from
// the last, against the hardware prefetchers' grain, and its products met cold operands (the scan's first products
// with dO, K and W took twice as long as the same shapes on hot data).
template <typename T>
void look_behind(const Head<T>& h, const Kept<T>& kept, const Grads<T>& out, int64_t n, Lookahead& ahead) {
  ahead.clear();
  if (n < 0) return;
  const int64_t t0 = n * h.C, c = std::min(h.C, h.steps - t0), M = h.M, D = h.D;
  ahead.add(kept.starts + n * M * D, M * D), ahead.add(h.q + t0 * M, c * M), ahead.add(h.k + t0 * M, c * M);
  ahead.add(h.v + t0 * D, c * D), ahead.add(out.dy + t0 * D, c * D), ahead.add(kept.values + t0 * D, c * D);
  ahead.add(kept.solved + t0 * (M + D), c * (M + D)), ahead.add(kept.pairs + n * 3 * h.C * h.C, 3 * h.C * h.C);
}

// dS: the gradient of S_T in, of state0 out ([M, D]).
template <typename T>
FWLAB_HOT void backward_head(const Head<T>& h, const Kept<T>& kept, T* dS, const Grads<T>& out) {
  Chunk<T> w(h.C, h.M, h.D);
  ScanGrads<T> d(h.C, h.M, h.D);
  const int64_t chunks = (h.steps + h.C - 1) / h.C, MD = h.M * h.D;
  for (int64_t n = chunks - 1; n >= 0; --n) {
    look_behind(h, kept, out, n - 1, w.ahead);
    prepare_gates(h, n * h.C, w);
    w.place(kept, n);
    backward_chunk(h, w, kept.starts + n * MD, dS, d, out);
    w.ahead.fetch_rest();
  }
}

// The entry points, one clone per instruction set (kernels/common/vector_clones.h): the loops between the BLAS products
// in the widest vectors the CPU has.
FWLAB_VECTOR_CLONES void forward_entry(const Head<float>& h, float* S, float* y, const Kept<float>& kept) {
  forward_head(h, S, y, kept);
}
FWLAB_VECTOR_CLONES void forward_entry(const Head<double>& h, double* S, double* y, const Kept<double>& kept) {
  forward_head(h, S, y, kept);
}
FWLAB_VECTOR_CLONES void backward_entry(const Head<float>& h, const Kept<float>& kept, float* dS,
                                        const Grads<float>& out) {
  backward_head(h, kept, dS, out);
}
FWLAB_VECTOR_CLONES void backward_entry(const Head<double>& h, const Kept<double>& kept, double* dS,
                                        const Grads<double>& out) {
  backward_head(h, kept, dS, out);
}

template <typename T>
T* at_head(const torch::Tensor& x, int64_t h) {
  return x.numel() ? x.data_ptr<T>() + h * (x.numel() / (x.size(0) * x.size(1))) : nullptr;
}

template <typename T>
Head<T> head_at(const std::vector<torch::Tensor>& in, int64_t h, int64_t C) {  // q, k, v, alpha, beta
  return {at_head<T>(in[0], h), at_head<T>(in[1], h), at_head<T>(in[2], h),
          at_head<T>(in[3], h), at_head<T>(in[4], h), in[0].size(2),
          in[0].size(3),        in[2].size(3),        C};
}

template <typename T>
Kept<T> kept_at(const std::vector<torch::Tensor>& kept, int64_t h) {  // starts, solved, values, pairs
  return {at_head<T>(kept[0], h), at_head<T>(kept[1], h), at_head<T>(kept[2], h), at_head<T>(kept[3], h)};
}

// [B, H, D, M] <-> [B, H, M, D]: the kernel's state is the transpose of fwlab's.
torch::Tensor transposed_state(const torch::Tensor& S) { return S.transpose(-1, -2).contiguous(); }

struct DeltaChunkCpu : public torch::autograd::Function<DeltaChunkCpu> {
  static variable_list forward(AutogradContext* ctx, torch::Tensor q, torch::Tensor k, torch::Tensor v,
                               torch::Tensor alpha, torch::Tensor beta, torch::Tensor S0, int64_t C) {
    const std::vector<torch::Tensor> in{q.contiguous(), k.contiguous(), v.contiguous(), alpha.contiguous(),
                                        beta.contiguous()};
    const int64_t B = q.size(0), H = q.size(1), T = q.size(2), M = q.size(3), D = v.size(3);
    auto S = transposed_state(S0);
    auto y = torch::empty({B, H, T, D}, v.options());
    const int64_t chunks = std::max<int64_t>(1, (T + C - 1) / C);
    auto starts = torch::empty({B, H, chunks, M, D}, v.options());
    auto solved = torch::empty({B, H, T, M + D}, v.options());
    auto values = torch::empty({B, H, T, D}, v.options()), pairs = torch::empty({B, H, chunks, 3 * C * C}, v.options());
    const std::vector<torch::Tensor> kept{starts, solved, values, pairs};
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "delta_chunk_cpu", [&] {
      for_each_head_queued(B * H, [&](int64_t n) {
        forward_entry(head_at<scalar_t>(in, n, C), at_head<scalar_t>(S, n), at_head<scalar_t>(y, n),
                      kept_at<scalar_t>(kept, n));
      });
    });
    ctx->save_for_backward({in[0], in[1], in[2], in[3], in[4], starts, solved, values, pairs});
    ctx->saved_data["C"] = C;
    return {y, transposed_state(S)};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const std::vector<torch::Tensor> in(saved.begin(), saved.begin() + 5), kept(saved.begin() + 5, saved.end());
    const int64_t C = ctx->saved_data["C"].toInt(), B = in[0].size(0), H = in[0].size(1);
    const auto dy = grads[0].defined() ? grads[0].contiguous() : torch::zeros_like(in[2]);
    auto dS = grads[1].defined() ? transposed_state(grads[1])
                                 : torch::zeros({B, H, in[0].size(3), in[2].size(3)}, in[2].options());
    auto dq = torch::empty_like(in[0]), dk = torch::empty_like(in[1]), dv = torch::empty_like(in[2]);
    auto dalpha = torch::zeros_like(in[3]), dbeta = torch::empty_like(in[4]);
    AT_DISPATCH_FLOATING_TYPES(in[0].scalar_type(), "delta_chunk_cpu_backward", [&] {
      for_each_head_queued(B * H, [&](int64_t n) {
        const Grads<scalar_t> g{at_head<scalar_t>(dy, n), at_head<scalar_t>(dq, n),     at_head<scalar_t>(dk, n),
                                at_head<scalar_t>(dv, n), at_head<scalar_t>(dalpha, n), at_head<scalar_t>(dbeta, n)};
        backward_entry(head_at<scalar_t>(in, n, C), kept_at<scalar_t>(kept, n), at_head<scalar_t>(dS, n), g);
      });
    });
    return {dq, dk, dv, in[3].numel() ? dalpha : torch::Tensor(), dbeta, transposed_state(dS), torch::Tensor()};
  }
};

}  // namespace wy_chunks

bool chunk_cpu_available() { return blas::available(); }

RecurrenceResult gated_delta_recurrence_chunk_cpu(const torch::Tensor& q_in, const torch::Tensor& k_in,
                                                  const torch::Tensor& v_in, const torch::Tensor& alpha_in,
                                                  const torch::Tensor& beta_in, const torch::Tensor& state0_in,
                                                  int64_t chunk) {
  const auto q = widened_to_fp32(q_in), k = widened_to_fp32(k_in), v = widened_to_fp32(v_in),
             beta = widened_to_fp32(beta_in), state0 = widened_to_fp32(state0_in);
  const auto alpha = alpha_in.defined() ? widened_to_fp32(alpha_in) : torch::empty({0}, q.options());
  if (!q.device().is_cpu() || !blas::available())
    return gated_delta_recurrence_chunked(q, k, v, alpha_in.defined() ? alpha : torch::Tensor(), beta, state0, chunk);
  const auto S0 = state0.defined() ? state0 : torch::zeros({v.size(0), v.size(1), v.size(3), k.size(3)}, v.options());
  auto out = wy_chunks::DeltaChunkCpu::apply(q, k, v, alpha, beta, S0, std::max<int64_t>(1, chunk));
  return {out[0], out[1]};
}

}  // namespace fwlab::kernels

// Chunked CPU kernel of the delta rule and the gated delta rule: the WY form of chunk_libtorch.cpp (which states
// the algebra) as raw loops around BLAS products (kernels/cpu_blas.h), one (batch, head) per task of the ATen
// thread pool, with its own backward. Per chunk of c <= C steps, with the state S transposed ([M, D]: o = S^T q):
//   prepare:  g = cumsum log alpha, Gamma_ts = e^{g_t - g_s} (s <= t), A = strict(diag(beta) (K K^T . Gamma)),
//             X = [W U] = (I + A)^-1 [diag(beta e^g) K, diag(beta) V],  P = (Q K^T) . Gamma
//   scan:     u = U - W S,  O = diag(e^g) Q S + P u,  S <- e^{g_c} S + (diag(e^{g_c - g}) K)^T u
// The forward keeps each chunk's starting state (T / C states per head) and X (T x (M + D)); the backward
// recomputes the rest of a chunk's preparation from its inputs, walks the scan back, then the preparation:
//   du = P^T dO + Kw dS,  dP = dO u^T,  dQr = dO S^T,  dKw = u dS^T,  dX = [-du S^T, du],
//   dS <- e^{g_c} dS + Qr^T dO - W^T du,  dR = (I + A)^-T dX,  dA = -strict(dR X^T),
// and the elementwise rules of each product (pair_grads, gate_grads). No gate (the delta rule) is g = 0.
#include <ATen/Parallel.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu_blas.h"
#include "kernels/recurrences.h"

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

// One chunk's preparation and scratch, sized for the longest chunk.
template <typename T>
struct Chunk {
  int64_t t0 = 0, c = 0, C, M, D, MD;
  std::vector<T> g, gam, Gam, KK, QK, A, P, X, u, Qr, Kw;  // Gam: Gamma (C x C), 1 on and below the diagonal ungated
  Chunk(int64_t C_, int64_t M_, int64_t D_)
      : C(C_),
        M(M_),
        D(D_),
        MD(M_ + D_),
        g(C_),
        gam(C_),
        Gam(C_ * C_),
        KK(C_ * C_),
        QK(C_ * C_),
        A(C_ * C_),
        P(C_ * C_),
        X(C_ * (M_ + D_)),
        u(C_ * D_),
        Qr(C_ * M_),
        Kw(C_ * M_) {}
  T decay(int64_t t, int64_t s) const { return Gam[t * C + s]; }
  T gate() const { return gam[c - 1]; }
};

template <typename T>
T log_gate(const T* alpha, int64_t t) {
  return alpha ? std::log(std::max(alpha[t], static_cast<T>(std::numeric_limits<float>::min()))) : T(0);
}

// X from the forward where the backward has it (`solved`, c x (M + D)), else the solve.
template <typename T>
void prepare(const Head<T>& h, int64_t t0, Chunk<T>& w, const T* solved = nullptr) {
  w.t0 = t0, w.c = std::min(h.C, h.steps - t0);
  const int64_t c = w.c, M = h.M, D = h.D, C = w.C, MD = w.MD;
  const T *Q = h.q + t0 * M, *K = h.k + t0 * M, *V = h.v + t0 * D, *beta = h.beta + t0;
  for (int64_t t = 0; t < c; ++t) {
    w.g[t] = (t ? w.g[t - 1] : T(0)) + log_gate(h.alpha, t0 + t);
    w.gam[t] = std::exp(w.g[t]);
  }
  for (int64_t t = 0; t < c; ++t)
    for (int64_t s = 0; s < c; ++s) w.Gam[t * C + s] = s > t ? T(0) : h.alpha ? std::exp(w.g[t] - w.g[s]) : T(1);
  blas::gemm<T>(false, true, c, c, M, 1, K, M, K, M, 0, w.KK.data(), C);
  blas::gemm<T>(false, true, c, c, M, 1, Q, M, K, M, 0, w.QK.data(), C);
  for (int64_t t = 0; t < c; ++t)
    for (int64_t s = 0; s < c; ++s) {
      const T gamma = w.decay(t, s);
      w.A[t * C + s] = s < t ? beta[t] * w.KK[t * C + s] * gamma : T(0);
      w.P[t * C + s] = w.QK[t * C + s] * gamma;
    }
  for (int64_t t = 0; t < c; ++t) {
    const T to_end = std::exp(w.g[c - 1] - w.g[t]);
    for (int64_t j = 0; j < M; ++j) {
      w.X[t * MD + j] = beta[t] * w.gam[t] * K[t * M + j];
      w.Qr[t * M + j] = w.gam[t] * Q[t * M + j];
      w.Kw[t * M + j] = to_end * K[t * M + j];
    }
    for (int64_t i = 0; i < D; ++i) w.X[t * MD + M + i] = beta[t] * V[t * D + i];
  }
  if (solved)
    std::copy(solved, solved + c * MD, w.X.begin());
  else
    blas::unit_lower_solve<T>(false, c, MD, w.A.data(), C, w.X.data(), MD);
}

// u = U - W S for the prepared chunk.
template <typename T>
void new_values(Chunk<T>& w, const T* S) {
  for (int64_t t = 0; t < w.c; ++t)
    for (int64_t i = 0; i < w.D; ++i) w.u[t * w.D + i] = w.X[t * w.MD + w.M + i];
  blas::gemm<T>(false, false, w.c, w.D, w.M, -1, w.X.data(), w.MD, S, w.D, 1, w.u.data(), w.D);
}

// y rows of the chunk, and S advanced to its end.
template <typename T>
void scan_forward(Chunk<T>& w, T* S, T* y) {
  const int64_t c = w.c, M = w.M, D = w.D;
  new_values(w, S);
  blas::gemm<T>(false, false, c, D, M, 1, w.Qr.data(), M, S, D, 0, y, D);
  blas::gemm<T>(false, false, c, D, c, 1, w.P.data(), w.C, w.u.data(), D, 1, y, D);
  const T gate = w.gate();
  if (gate != T(1))
    for (int64_t n = 0; n < M * D; ++n) S[n] *= gate;
  blas::gemm<T>(true, false, M, D, c, 1, w.Kw.data(), M, w.u.data(), D, 1, S, D);
}

// S: state0 [M, D] in, S_T out; y [T, D]; starts [chunks, M, D]; solved [T, M + D]: each chunk's X, kept so
// that the backward need not solve again.
template <typename T>
void forward_head(const Head<T>& h, T* S, T* y, T* starts, T* solved) {
  Chunk<T> w(h.C, h.M, h.D);
  const int64_t MD = h.M * h.D;
  for (int64_t t0 = 0, n = 0; t0 < h.steps; t0 += h.C, ++n) {
    std::copy(S, S + MD, starts + n * MD);
    prepare(h, t0, w);
    std::copy(w.X.begin(), w.X.begin() + w.c * w.MD, solved + t0 * w.MD);
    scan_forward(w, S, y + t0 * h.D);
  }
}

template <typename T>
struct Grads {  // one head's; dy is never null (zeros where no gradient reached y)
  const T* dy;
  T *dq, *dk, *dv, *dalpha, *dbeta;
};

// The chunk's scan walked back: dS holds the gradient of its end state on entry and of its start on exit. Leaves
// dX = [dW dU] in X's place of `d`, and dP, dQr, dKw, dgate.
template <typename T>
struct ScanGrads {
  std::vector<T> dX, dP, dQr, dKw, du;
  T dgate = 0;
  ScanGrads(int64_t C, int64_t M, int64_t D) : dX(C * (M + D)), dP(C * C), dQr(C * M), dKw(C * M), du(C * D) {}
};

template <typename T>
void scan_backward(const Chunk<T>& w, const T* S, const T* dO, T* dS, ScanGrads<T>& d) {
  const int64_t c = w.c, M = w.M, D = w.D, C = w.C, MD = w.MD;
  blas::gemm<T>(true, false, c, D, c, 1, w.P.data(), C, dO, D, 0, d.du.data(), D);
  blas::gemm<T>(false, false, c, D, M, 1, w.Kw.data(), M, dS, D, 1, d.du.data(), D);
  blas::gemm<T>(false, true, c, c, D, 1, dO, D, w.u.data(), D, 0, d.dP.data(), C);
  blas::gemm<T>(false, true, c, M, D, 1, dO, D, S, D, 0, d.dQr.data(), M);
  blas::gemm<T>(false, true, c, M, D, 1, w.u.data(), D, dS, D, 0, d.dKw.data(), M);
  blas::gemm<T>(false, true, c, M, D, -1, d.du.data(), D, S, D, 0, d.dX.data(), MD);
  for (int64_t t = 0; t < c; ++t)
    for (int64_t i = 0; i < D; ++i) d.dX[t * MD + M + i] = d.du[t * D + i];
  d.dgate = 0;
  for (int64_t n = 0; n < M * D; ++n) d.dgate += S[n] * dS[n];
  const T gate = w.gate();
  if (gate != T(1))
    for (int64_t n = 0; n < M * D; ++n) dS[n] *= gate;
  blas::gemm<T>(true, false, M, D, c, 1, w.Qr.data(), M, dO, D, 1, dS, D);
  blas::gemm<T>(true, false, M, D, c, -1, w.X.data(), MD, d.du.data(), D, 1, dS, D);
}

// The gradients through R = [diag(beta e^g) K, diag(beta) V] (dR in d.dX after the transposed solve): dk, dv and
// dbeta start here; dg gathers the gates' share.
template <typename T>
void solve_grads(const Head<T>& h, const Chunk<T>& w, const ScanGrads<T>& d, const Grads<T>& out, T* dg) {
  const int64_t M = w.M, D = w.D, MD = w.MD;
  for (int64_t t = 0; t < w.c; ++t) {
    const int64_t r = w.t0 + t;
    const T b = h.beta[r], *K = h.k + r * M, *V = h.v + r * D, *dRk = d.dX.data() + t * MD, *dRv = dRk + M;
    T k_dR = 0, v_dR = 0;
    for (int64_t j = 0; j < M; ++j) {
      k_dR += K[j] * dRk[j];
      out.dk[r * M + j] = b * w.gam[t] * dRk[j] + std::exp(w.g[w.c - 1] - w.g[t]) * d.dKw[t * M + j];
    }
    for (int64_t i = 0; i < D; ++i) {
      v_dR += V[i] * dRv[i];
      out.dv[r * D + i] = b * dRv[i];
    }
    out.dbeta[r] = w.gam[t] * k_dR + v_dR;
    dg[t] = b * w.gam[t] * k_dR;
  }
}

// The pairwise products: A (through dA = -strict(dR X^T)) and P. Returns E (the gradient of K K^T) and dQK in
// `E` and `dQK`, and adds the pairs' share to dbeta and dg.
template <typename T>
void pair_grads(const Head<T>& h, const Chunk<T>& w, ScanGrads<T>& d, std::vector<T>& E, std::vector<T>& dQK, T* dbeta,
                T* dg) {
  const int64_t c = w.c, C = w.C, MD = w.MD;
  blas::gemm<T>(false, true, c, c, MD, -1, d.dX.data(), MD, w.X.data(), MD, 0, E.data(), C);  // dA, unmasked
  for (int64_t t = 0; t < c; ++t) {
    const T b = h.beta[w.t0 + t];
    for (int64_t s = 0; s < c; ++s) {
      const T gamma = w.decay(t, s), dA = s < t ? E[t * C + s] : T(0), dP = s <= t ? d.dP[t * C + s] : T(0);
      dbeta[t] += dA * w.KK[t * C + s] * gamma;
      E[t * C + s] = b * dA * gamma;
      dQK[t * C + s] = dP * gamma;
      const T rho = (b * dA * w.KK[t * C + s] + dP * w.QK[t * C + s]) * gamma;  // dGamma_ts Gamma_ts
      dg[t] += rho, dg[s] -= rho;
    }
  }
}

template <typename T>
void gate_grads(const Head<T>& h, const Chunk<T>& w, const ScanGrads<T>& d, T* dg, T* dalpha) {
  const int64_t c = w.c, M = w.M;
  T to_end = 0;
  for (int64_t t = 0; t < c; ++t) {
    T qr = 0, kw = 0;
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
void backward_chunk(const Head<T>& h, Chunk<T>& w, const T* S, T* dS, ScanGrads<T>& d, const Grads<T>& out) {
  const int64_t c = w.c, M = w.M, C = w.C, MD = w.MD, t0 = w.t0;
  new_values(w, S);
  scan_backward(w, S, out.dy + t0 * w.D, dS, d);
  blas::unit_lower_solve<T>(true, c, MD, w.A.data(), C, d.dX.data(), MD);  // dR
  std::vector<T> dg(c), E(C * C), dQK(C * C);
  solve_grads(h, w, d, out, dg.data());
  pair_grads(h, w, d, E, dQK, out.dbeta + t0, dg.data());
  const T *Q = h.q + t0 * M, *K = h.k + t0 * M;
  T *dq = out.dq + t0 * M, *dk = out.dk + t0 * M;
  for (int64_t t = 0; t < c; ++t)
    for (int64_t j = 0; j < M; ++j) dq[t * M + j] = w.gam[t] * d.dQr[t * M + j];
  blas::gemm<T>(false, false, c, M, c, 1, dQK.data(), C, K, M, 1, dq, M);
  blas::gemm<T>(true, false, c, M, c, 1, dQK.data(), C, Q, M, 1, dk, M);
  blas::gemm<T>(false, false, c, M, c, 1, E.data(), C, K, M, 1, dk, M);
  blas::gemm<T>(true, false, c, M, c, 1, E.data(), C, K, M, 1, dk, M);
  if (h.alpha) gate_grads(h, w, d, dg.data(), out.dalpha);
}

// dS: the gradient of S_T in, of state0 out ([M, D]).
template <typename T>
void backward_head(const Head<T>& h, const T* starts, const T* solved, T* dS, const Grads<T>& out) {
  Chunk<T> w(h.C, h.M, h.D);
  ScanGrads<T> d(h.C, h.M, h.D);
  const int64_t chunks = (h.steps + h.C - 1) / h.C, MD = h.M * h.D;
  for (int64_t n = chunks - 1; n >= 0; --n) {
    prepare(h, n * h.C, w, solved + n * h.C * w.MD);
    backward_chunk(h, w, starts + n * MD, dS, d, out);
  }
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
    auto starts = torch::empty({B, H, std::max<int64_t>(1, (T + C - 1) / C), M, D}, v.options());
    auto solved = torch::empty({B, H, T, M + D}, v.options());
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "delta_chunk_cpu", [&] {
      at::parallel_for(0, B * H, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t n = lo; n < hi; ++n)
          forward_head(head_at<scalar_t>(in, n, C), at_head<scalar_t>(S, n), at_head<scalar_t>(y, n),
                       at_head<scalar_t>(starts, n), at_head<scalar_t>(solved, n));
      });
    });
    ctx->save_for_backward({in[0], in[1], in[2], in[3], in[4], starts, solved});
    ctx->saved_data["C"] = C;
    return {y, transposed_state(S)};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const std::vector<torch::Tensor> in(saved.begin(), saved.begin() + 5);
    const int64_t C = ctx->saved_data["C"].toInt(), B = in[0].size(0), H = in[0].size(1);
    const auto dy = grads[0].defined() ? grads[0].contiguous() : torch::zeros_like(in[2]);
    auto dS = grads[1].defined() ? transposed_state(grads[1])
                                 : torch::zeros({B, H, in[0].size(3), in[2].size(3)}, in[2].options());
    auto dq = torch::empty_like(in[0]), dk = torch::empty_like(in[1]), dv = torch::empty_like(in[2]);
    auto dalpha = torch::zeros_like(in[3]), dbeta = torch::empty_like(in[4]);
    AT_DISPATCH_FLOATING_TYPES(in[0].scalar_type(), "delta_chunk_cpu_backward", [&] {
      at::parallel_for(0, B * H, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t n = lo; n < hi; ++n) {
          const Grads<scalar_t> g{at_head<scalar_t>(dy, n), at_head<scalar_t>(dq, n),     at_head<scalar_t>(dk, n),
                                  at_head<scalar_t>(dv, n), at_head<scalar_t>(dalpha, n), at_head<scalar_t>(dbeta, n)};
          backward_head(head_at<scalar_t>(in, n, C), at_head<scalar_t>(saved[5], n), at_head<scalar_t>(saved[6], n),
                        at_head<scalar_t>(dS, n), g);
        }
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

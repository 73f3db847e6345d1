// Chunkwise-parallel form of the delta rule and the gated delta rule: within a chunk of C steps the work is dense
// matrix products, and only a C-times-shorter recurrence runs across chunks (Yang et al. 2024, "Parallelizing
// Linear Transformers with the Delta Rule over Sequence Length", its WY / UT-transform form; the gates as in
// "Gated Delta Networks", flash-linear-attention's chunk_gated_delta_rule).
//
// With S the state transposed (key rows, value columns: o_t = S_t^T q_t) and, within a chunk, the cumulative
// log-gate g_t = sum_{r<=t} log alpha_r from the chunk start (g = 0 for the delta rule), the state after step t is
//   S_t = e^{g_t} S_0 + sum_{s<=t} e^{g_t - g_s} k_s u_s^T,   u = U - W S_0,
// where (I + A) [W U] = [diag(beta e^g) K, diag(beta) V] and A_ts = beta_t (k_t . k_s) e^{g_t - g_s} for s < t:
// one unit lower-triangular solve per chunk, independent of the state. Then
//   O   = diag(e^g) Q S_0 + (Q K^T . Gamma) u,     Gamma_ts = e^{g_t - g_s} (s <= t, else 0)
//   S_C = e^{g_C} S_0 + (diag(e^{g_C - g}) K)^T u.
// Every exponent is <= 0, so nothing overflows however strong the gate (alpha ~ e^-40 included).
//
// The state-independent part (the solve, Q K^T, the gates) runs for all chunks at once under autograd. The scan
// over chunks is one autograd node with its own backward, which keeps only the chunk-start states and u
// (T / C states per head, not T): the memory of the all-states form is never held.
#include <limits>

#include "kernels/delta/delta.h"

namespace fwlab::kernels {

namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The scan over chunks. W, Qr, Kw: [N, BH, C, Dk]; U: [N, BH, C, Dv]; P: [N, BH, C, C] (masked, decayed);
// gate: [N, BH, 1, 1] = e^{g_C} per chunk, or empty (the delta rule: an autograd node's inputs must be defined);
// S0: [BH, Dk, Dv].
// Returns O [N, BH, C, Dv] and the final state.
struct ChunkScan : torch::autograd::Function<ChunkScan> {
  static variable_list forward(AutogradContext* ctx, Tensor W, Tensor U, Tensor P, Tensor Qr, Tensor Kw, Tensor gate,
                               Tensor S0) {
    const int64_t N = W.size(0);
    const bool gated = gate.numel() > 0;
    auto O = torch::empty_like(U), u = torch::empty_like(U);
    auto starts = torch::empty({N, S0.size(0), S0.size(1), S0.size(2)}, S0.options());
    auto S = S0.clone();
    for (int64_t n = 0; n < N; ++n) {
      starts[n].copy_(S);
      auto u_n = u[n], O_n = O[n];
      torch::baddbmm_out(u_n, U[n], W[n], S, /*beta=*/1, /*alpha=*/-1);  // u = U - W S
      torch::bmm_out(O_n, Qr[n], S);
      O_n.baddbmm_(P[n], u_n);
      if (gated) S.mul_(gate[n]);
      S.baddbmm_(Kw[n].transpose(1, 2), u_n);
    }
    ctx->save_for_backward({W, P, Qr, Kw, gate, starts, u});
    return {O, S};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &W = saved[0], &P = saved[1], &Qr = saved[2], &Kw = saved[3], &gate = saved[4], &starts = saved[5],
               &u = saved[6];
    const int64_t N = W.size(0);
    const bool gated = gate.numel() > 0;
    const auto dO = grads[0].defined() ? grads[0].contiguous() : torch::zeros_like(u);
    auto dS = grads[1].defined() ? grads[1].clone() : torch::zeros_like(starts[0]);
    auto dW = torch::empty_like(W), dU = torch::empty_like(u), dP = torch::empty_like(P);
    auto dQr = torch::empty_like(Qr), dKw = torch::empty_like(Kw);
    auto dgate = gated ? torch::empty_like(gate) : Tensor();
    for (int64_t n = N - 1; n >= 0; --n) {
      const auto S = starts[n];
      auto du = dU[n], dW_n = dW[n], dP_n = dP[n], dQr_n = dQr[n], dKw_n = dKw[n];
      torch::bmm_out(du, P[n].transpose(1, 2), dO[n]);  // dS here is the gradient of the chunk's end state
      du.baddbmm_(Kw[n], dS);
      torch::bmm_out(dP_n, dO[n], u[n].transpose(1, 2));
      torch::bmm_out(dQr_n, dO[n], S.transpose(1, 2));
      torch::bmm_out(dKw_n, u[n], dS.transpose(1, 2));
      torch::bmm_out(dW_n, du, S.transpose(1, 2));
      dW_n.neg_();
      if (gated) {
        dgate[n].copy_((S * dS).sum({1, 2}, true));
        dS.mul_(gate[n]);
      }
      dS.baddbmm_(Qr[n].transpose(1, 2), dO[n]);
      dS.baddbmm_(W[n].transpose(1, 2), du, /*beta=*/1, /*alpha=*/-1);
    }
    return {dW, dU, dP, dQr, dKw, dgate, dS};
  }
};

// [B, H, T, w] -> [N, B*H, C, w], zero-padded to N * C steps.
Tensor chunks_first(const Tensor& x, int64_t C, int64_t N) {
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2), w = x.size(3), pad = N * C - T;
  auto padded = pad ? torch::constant_pad_nd(x, {0, 0, 0, pad}) : x;
  return padded.reshape({B * H, N, C, w}).transpose(0, 1).contiguous();
}

}  // namespace

RecurrenceResult gated_delta_recurrence_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& alpha,
                                                const Tensor& beta, const Tensor& state0, int64_t chunk) {
  TORCH_CHECK(q.dim() == 4 && k.sizes() == q.sizes() && v.dim() == 4, "gated_delta_recurrence_chunked: bad shapes");
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), M = q.size(3), D = v.size(3);
  const int64_t C = std::max<int64_t>(1, std::min(chunk, T)), N = (T + C - 1) / C;
  const auto qc = chunks_first(q, C, N), kc = chunks_first(k, C, N), vc = chunks_first(v, C, N);
  const auto bc = chunks_first(beta, C, N);  // padded steps have beta = 0 and log alpha = 0: S is untouched
  const auto strict = torch::ones({C, C}, q.options().dtype(torch::kBool)).tril(-1);
  const auto later = torch::ones({C, C}, q.options().dtype(torch::kBool)).triu(1);  // s > t
  auto scores = torch::matmul(qc, kc.transpose(-1, -2)), kk = torch::matmul(kc, kc.transpose(-1, -2));
  Tensor A, P, Qr = qc, Kw = kc, gate = torch::empty({0}, q.options()), rhs_k = bc * kc;
  if (alpha.defined()) {
    // alpha = 0 exactly is taken as the smallest normal number, so that g_t - g_s never meets -inf - -inf.
    const auto floor = std::numeric_limits<float>::min();
    const auto g = chunks_first(alpha.clamp_min(floor).log(), C, N).cumsum(2);  // [N, BH, C, 1]
    const auto g_last = g.narrow(2, C - 1, 1);
    const auto decay = (g - g.transpose(-1, -2)).masked_fill(later, -std::numeric_limits<double>::infinity()).exp();
    A = (bc * kk * decay).masked_fill(strict.logical_not(), 0.0);
    P = scores * decay;
    Qr = qc * g.exp();
    Kw = kc * (g_last - g).exp();
    rhs_k = rhs_k * g.exp();
    gate = g_last.exp();
  } else {
    A = (bc * kk).masked_fill(strict.logical_not(), 0.0);
    P = scores.masked_fill(later, 0.0);
  }
  // unitriangular: the solve takes A's diagonal as ones, which is I + A.
  const auto WU = torch::linalg_solve_triangular(A, torch::cat({rhs_k, bc * vc}, -1), /*upper=*/false,
                                                 /*left=*/true, /*unitriangular=*/true);
  const auto S0 = state0.defined() ? state0.reshape({B * H, D, M}).transpose(1, 2).contiguous()
                                   : torch::zeros({B * H, M, D}, v.options());
  auto out = ChunkScan::apply(WU.narrow(-1, 0, M).contiguous(), WU.narrow(-1, M, D).contiguous(), P.contiguous(),
                              Qr.contiguous(), Kw.contiguous(), gate, S0);
  auto y = out[0].transpose(0, 1).reshape({B, H, N * C, D}).narrow(2, 0, T);
  return {y, out[1].transpose(1, 2).reshape({B, H, D, M})};
}

RecurrenceResult delta_recurrence_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& beta,
                                          const Tensor& state0, int64_t chunk) {
  return gated_delta_recurrence_chunked(q, k, v, Tensor(), beta, state0, chunk);
}

}  // namespace fwlab::kernels

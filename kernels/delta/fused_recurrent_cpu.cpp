// Fused CPU kernel of the delta rule with a hand-written backward that reverts the state step by step
// (S_{t-1} = S_t - delta_t k_t^T), as the delta-rule reference kernels do: training memory O(T * D) per head
// instead of one saved state per step. Each (batch, head) runs independently on the ATen thread pool.
//
// Forward, per head:  u_t = S_{t-1} k_t,  delta_t = beta_t (v_t - u_t),  S_t = S_{t-1} + delta_t k_t^T,  y_t = S_t q_t
// Backward, t = T..1, with G the gradient of S_t:
//   G += dy_t q_t^T;  dq_t = S_t^T dy_t;  d(delta)_t = G k_t;  dk_t = G^T delta_t
//   dbeta_t = d(delta)_t . (v_t - u_t);  dv_t = beta_t d(delta)_t;  du = -beta_t d(delta)_t
//   revert S_{t-1} = S_t - delta_t k_t^T;  G += du k_t^T;  dk_t += S_{t-1}^T du
#include <ATen/Parallel.h>

#include "kernels/common/head_grain.h"
#include "kernels/delta/delta.h"

namespace fwlab::kernels {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

template <typename T>
void forward_head(const T* q, const T* k, const T* v, const T* beta, T* S, T* y, T* delta, int64_t Tn, int64_t M,
                  int64_t D) {
  std::vector<T> u(static_cast<size_t>(D));
  for (int64_t t = 0; t < Tn; ++t) {
    const T* kt = k + t * M;
    const T* qt = q + t * M;
    const T b = beta[t];
    T* dt = delta + t * D;
    for (int64_t i = 0; i < D; ++i) {
      T acc = 0;
      for (int64_t j = 0; j < M; ++j) acc += S[i * M + j] * kt[j];
      dt[i] = b * (v[t * D + i] - acc);
    }
    T* yt = y + t * D;
    for (int64_t i = 0; i < D; ++i) {
      T acc = 0;
      for (int64_t j = 0; j < M; ++j) {
        S[i * M + j] += dt[i] * kt[j];
        acc += S[i * M + j] * qt[j];
      }
      yt[i] = acc;
    }
  }
}

template <typename T>
void backward_head(const T* q, const T* k, const T* v, const T* beta, const T* delta, const T* S_final, const T* dy,
                   const T* dS_final, T* dq, T* dk, T* dv, T* dbeta, T* dS0, int64_t Tn, int64_t M, int64_t D) {
  std::vector<T> S(S_final, S_final + D * M), G(static_cast<size_t>(D * M)), ddelta(static_cast<size_t>(D)),
      du(static_cast<size_t>(D));
  if (dS_final)
    std::copy(dS_final, dS_final + D * M, G.begin());
  else
    std::fill(G.begin(), G.end(), T(0));
  for (int64_t t = Tn - 1; t >= 0; --t) {
    const T* kt = k + t * M;
    const T* qt = q + t * M;
    const T* dt = delta + t * D;
    const T* dyt = dy ? dy + t * D : nullptr;
    T* dqt = dq + t * M;
    T* dkt = dk + t * M;
    for (int64_t j = 0; j < M; ++j) dqt[j] = dkt[j] = 0;
    if (dyt) {
      for (int64_t i = 0; i < D; ++i)
        for (int64_t j = 0; j < M; ++j) {
          G[i * M + j] += dyt[i] * qt[j];
          dqt[j] += S[i * M + j] * dyt[i];
        }
    }
    // Revert to S_{t-1} first: u_t = S_{t-1} k_t is needed for dbeta.
    for (int64_t i = 0; i < D; ++i)
      for (int64_t j = 0; j < M; ++j) S[i * M + j] -= dt[i] * kt[j];
    T db = 0;
    const T b = beta[t];
    for (int64_t i = 0; i < D; ++i) {
      T acc = 0, u = 0;
      for (int64_t j = 0; j < M; ++j) {
        acc += G[i * M + j] * kt[j];
        dkt[j] += G[i * M + j] * dt[i];
        u += S[i * M + j] * kt[j];
      }
      ddelta[i] = acc;
      db += acc * (v[t * D + i] - u);
      dv[t * D + i] = b * acc;
      du[i] = -b * acc;
    }
    dbeta[t] = db;
    for (int64_t i = 0; i < D; ++i)
      for (int64_t j = 0; j < M; ++j) {
        G[i * M + j] += du[i] * kt[j];
        dkt[j] += S[i * M + j] * du[i];
      }
  }
  std::copy(G.begin(), G.end(), dS0);
}

struct DeltaFunction : public torch::autograd::Function<DeltaFunction> {
  static variable_list forward(AutogradContext* ctx, torch::Tensor q, torch::Tensor k, torch::Tensor v,
                               torch::Tensor beta, torch::Tensor S0) {
    q = q.contiguous();
    k = k.contiguous();
    v = v.contiguous();
    beta = beta.contiguous();
    const int64_t B = q.size(0), H = q.size(1), T = q.size(2), M = q.size(3), D = v.size(3);
    auto S = S0.contiguous().clone();
    auto y = torch::empty({B, H, T, D}, v.options());
    auto delta = torch::empty({B, H, T, D}, v.options());
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "delta_recurrence_fused", [&] {
      at::parallel_for(0, B * H, head_grain(B * H, T * D * M), [&](int64_t lo, int64_t hi) {
        for (int64_t h = lo; h < hi; ++h)
          forward_head<scalar_t>(q.data_ptr<scalar_t>() + h * T * M, k.data_ptr<scalar_t>() + h * T * M,
                                 v.data_ptr<scalar_t>() + h * T * D, beta.data_ptr<scalar_t>() + h * T,
                                 S.data_ptr<scalar_t>() + h * D * M, y.data_ptr<scalar_t>() + h * T * D,
                                 delta.data_ptr<scalar_t>() + h * T * D, T, M, D);
      });
    });
    ctx->save_for_backward({q, k, v, beta, delta, S});
    return {y, S};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &beta = saved[3], &delta = saved[4], &S = saved[5];
    const int64_t B = q.size(0), H = q.size(1), T = q.size(2), M = q.size(3), D = v.size(3);
    auto dy = grads[0].defined() ? grads[0].contiguous() : torch::Tensor();
    auto dS = grads[1].defined() ? grads[1].contiguous() : torch::Tensor();
    auto dq = torch::empty_like(q), dk = torch::empty_like(k), dv = torch::empty_like(v),
         dbeta = torch::empty_like(beta);
    auto dS0 = torch::empty_like(S);
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "delta_recurrence_fused_backward", [&] {
      at::parallel_for(0, B * H, head_grain(B * H, 3 * T * D * M), [&](int64_t lo, int64_t hi) {
        for (int64_t h = lo; h < hi; ++h)
          backward_head<scalar_t>(q.data_ptr<scalar_t>() + h * T * M, k.data_ptr<scalar_t>() + h * T * M,
                                  v.data_ptr<scalar_t>() + h * T * D, beta.data_ptr<scalar_t>() + h * T,
                                  delta.data_ptr<scalar_t>() + h * T * D, S.data_ptr<scalar_t>() + h * D * M,
                                  dy.defined() ? dy.data_ptr<scalar_t>() + h * T * D : nullptr,
                                  dS.defined() ? dS.data_ptr<scalar_t>() + h * D * M : nullptr,
                                  dq.data_ptr<scalar_t>() + h * T * M, dk.data_ptr<scalar_t>() + h * T * M,
                                  dv.data_ptr<scalar_t>() + h * T * D, dbeta.data_ptr<scalar_t>() + h * T,
                                  dS0.data_ptr<scalar_t>() + h * D * M, T, M, D);
      });
    });
    return {dq, dk, dv, dbeta, dS0};
  }
};

}  // namespace

RecurrenceResult delta_recurrence_fused(const torch::Tensor& q_in, const torch::Tensor& k_in, const torch::Tensor& v_in,
                                        const torch::Tensor& beta_in, const torch::Tensor& state0_in) {
  // Mixed precision: the recurrence runs in fp32 (its state and normalisation must).
  const auto q = widened_to_fp32(q_in), k = widened_to_fp32(k_in), v = widened_to_fp32(v_in),
             beta = widened_to_fp32(beta_in), state0 = widened_to_fp32(state0_in);
  if (!q.device().is_cpu()) return delta_recurrence_naive(q, k, v, beta, state0);
  auto S0 = state0.defined() ? state0 : torch::zeros({v.size(0), v.size(1), v.size(3), k.size(3)}, v.options());
  auto out = DeltaFunction::apply(q, k, v, beta, S0);
  return {out[0], out[1]};
}

}  // namespace fwlab::kernels

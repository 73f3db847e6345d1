// Fused CPU kernel of the gated delta rule (Yang, Kautz & Hatamizadeh 2024, "Gated Delta Networks"; the
// recurrence of flash-linear-attention's naive_recurrent_gated_delta_rule, with S as [D, M] here):
//   S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T,   y_t = S_t q_t   (read after write)
// computed as  u_t = S_{t-1} k_t,  e_t = v_t - alpha_t u_t,  S_t = alpha_t S_{t-1} + beta_t e_t k_t^T.
// The state cannot be reverted without dividing by alpha_t (a gate near 0 would make that unstable), so the
// backward is the decay kernel's: the forward keeps S every kSegment steps, the backward recomputes a segment's
// states from its checkpoint and walks it backwards. Memory O(T/16 D M + 17 D M) per head. With G the gradient
// of S_t (dy_t q_t^T included) and de = beta_t G k_t:
//   dq_t = S_t^T dy_t,  dv_t = de,  dbeta_t = e_t . G k_t,  dalpha_t = <G, S_{t-1}> - u_t . de,
//   dk_t = beta_t G^T e_t - alpha_t S_{t-1}^T de,  G_{t-1} = alpha_t (G - de k_t^T).
// Each (batch, head) runs independently on the ATen thread pool.
#include <ATen/Parallel.h>

#include "kernels/common/head_grain.h"
#include "kernels/delta/delta.h"
#include "kernels/common/segment_checkpoints.h"

namespace fwlab::kernels {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// One head's inputs: q, k [T, M]; v [T, D]; alpha, beta [T].
template <typename T>
struct Head {
  const T *q, *k, *v, *alpha, *beta;
  int64_t steps, M, D;
};

// S_out <- alpha S_in + beta (v - alpha S_in k) k^T for step t, row by row (S_in k first, then the update); S_out
// may be S_in.
template <typename T>
void step(const Head<T>& h, int64_t t, const T* S_in, T* S_out) {
  const T* kt = h.k + t * h.M;
  const T a = h.alpha[t], b = h.beta[t];
  for (int64_t i = 0; i < h.D; ++i) {
    const T* in = S_in + i * h.M;
    T* out = S_out + i * h.M;
    T uk = 0;
    for (int64_t j = 0; j < h.M; ++j) uk += in[j] * kt[j];
    const T be = b * (h.v[t * h.D + i] - a * uk);
    for (int64_t j = 0; j < h.M; ++j) out[j] = a * in[j] + be * kt[j];
  }
}

// y [T, D]; S: state0 in, S_T out; checkpoints [segments, D, M]: the state before each segment's first step.
template <typename T>
void forward_head(const Head<T>& h, T* S, T* y, T* checkpoints) {
  const int64_t DM = h.D * h.M;
  for (int64_t t = 0; t < h.steps; ++t) {
    keep_checkpoint(t, S, DM, checkpoints);
    step(h, t, S, S);
    const T* qt = h.q + t * h.M;
    for (int64_t i = 0; i < h.D; ++i) {
      T acc = 0;
      for (int64_t j = 0; j < h.M; ++j) acc += S[i * h.M + j] * qt[j];
      y[t * h.D + i] = acc;
    }
  }
  if (h.steps == 0) std::copy(S, S + DM, checkpoints);
}

template <typename T>
struct HeadGrads {
  const T *dy, *dS_final;  // either may be null (no gradient reaches it)
  T *dq, *dk, *dv, *dalpha, *dbeta, *dS0;
};

// One step backwards: G holds the gradient of S_t on entry (without y_t's read) and of S_{t-1} on exit. Two passes
// over each state row: the first adds y_t's read and gathers G k, S_{t-1} k and <G, S_{t-1}>; the second, once the
// row's de is known, adds its share of dk and turns the row of G into that of S_{t-1}.
template <typename T>
void backward_step(const Head<T>& h, const HeadGrads<T>& g, int64_t t, const T* S_prev, const T* S_t, T* G) {
  const int64_t M = h.M, D = h.D;
  const T* kt = h.k + t * M;
  const T* qt = h.q + t * M;
  const T a = h.alpha[t], b = h.beta[t];
  T* dqt = g.dq + t * M;
  T* dkt = g.dk + t * M;
  for (int64_t j = 0; j < M; ++j) dqt[j] = dkt[j] = 0;
  T dalpha = 0, dbeta = 0;
  for (int64_t i = 0; i < D; ++i) {
    T* Gi = G + i * M;
    const T* Pi = S_prev + i * M;
    const T* Si = S_t + i * M;
    const T dyi = g.dy ? g.dy[t * D + i] : T(0);
    T Gk = 0, uk = 0, GP = 0;
    for (int64_t j = 0; j < M; ++j) {
      Gi[j] += dyi * qt[j];
      dqt[j] += Si[j] * dyi;
      Gk += Gi[j] * kt[j];
      uk += Pi[j] * kt[j];
      GP += Gi[j] * Pi[j];
    }
    const T e = h.v[t * D + i] - a * uk, de = b * Gk;
    g.dv[t * D + i] = de;
    dbeta += e * Gk;
    dalpha += GP - uk * de;
    for (int64_t j = 0; j < M; ++j) {
      dkt[j] += b * e * Gi[j] - a * de * Pi[j];
      Gi[j] = a * (Gi[j] - de * kt[j]);
    }
  }
  g.dalpha[t] = dalpha, g.dbeta[t] = dbeta;
}

template <typename T>
void backward_head(const Head<T>& h, const T* checkpoints, const HeadGrads<T>& g) {
  const int64_t DM = h.D * h.M;
  std::vector<T> G(static_cast<size_t>(DM), T(0)), states;
  if (g.dS_final) std::copy(g.dS_final, g.dS_final + DM, G.begin());
  backward_by_segments(
      h.steps, DM, checkpoints, states, [&](int64_t t, const T* S_prev, T* S_t) { step(h, t, S_prev, S_t); },
      [&](int64_t t, const T* S_prev, const T* S_t) { backward_step(h, g, t, S_prev, S_t, G.data()); });
  std::copy(G.begin(), G.end(), g.dS0);
}

template <typename T>
Head<T> head_at(const std::vector<torch::Tensor>& in, int64_t h) {  // in: q, k, v, alpha, beta (contiguous)
  const int64_t steps = in[0].size(2), M = in[0].size(3), D = in[2].size(3);
  return {in[0].data_ptr<T>() + h * steps * M,
          in[1].data_ptr<T>() + h * steps * M,
          in[2].data_ptr<T>() + h * steps * D,
          in[3].data_ptr<T>() + h * steps,
          in[4].data_ptr<T>() + h * steps,
          steps,
          M,
          D};
}

template <typename T>
T* at_head(const torch::Tensor& x, int64_t h, int64_t per_head) {
  return x.defined() ? x.data_ptr<T>() + h * per_head : nullptr;
}

struct GatedDeltaFunction : public torch::autograd::Function<GatedDeltaFunction> {
  static variable_list forward(AutogradContext* ctx, torch::Tensor q, torch::Tensor k, torch::Tensor v,
                               torch::Tensor alpha, torch::Tensor beta, torch::Tensor S0) {
    const std::vector<torch::Tensor> in{q.contiguous(), k.contiguous(), v.contiguous(), alpha.contiguous(),
                                        beta.contiguous()};
    const int64_t BH = q.size(0) * q.size(1), T = q.size(2), M = q.size(3), D = v.size(3);
    auto S = S0.contiguous().clone();
    auto y = torch::empty({q.size(0), q.size(1), T, D}, v.options());
    auto checkpoints = torch::empty({BH, segment_count(T), D, M}, v.options());
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "gated_delta_recurrence_fused", [&] {
      at::parallel_for(0, BH, head_grain(BH, T * D * M), [&](int64_t lo, int64_t hi) {
        for (int64_t h = lo; h < hi; ++h)
          forward_head(head_at<scalar_t>(in, h), at_head<scalar_t>(S, h, D * M), at_head<scalar_t>(y, h, T * D),
                       at_head<scalar_t>(checkpoints, h, checkpoints.size(1) * D * M));
      });
    });
    ctx->save_for_backward({in[0], in[1], in[2], in[3], in[4], checkpoints});
    return {y, S};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const std::vector<torch::Tensor> in(saved.begin(), saved.begin() + 5);
    const auto& checkpoints = saved[5];
    const int64_t BH = in[0].size(0) * in[0].size(1), T = in[0].size(2), M = in[0].size(3), D = in[2].size(3);
    const auto dy = grads[0].defined() ? grads[0].contiguous() : torch::Tensor();
    const auto dS = grads[1].defined() ? grads[1].contiguous() : torch::Tensor();
    auto dq = torch::empty_like(in[0]), dk = torch::empty_like(in[1]), dv = torch::empty_like(in[2]);
    auto dalpha = torch::empty_like(in[3]), dbeta = torch::empty_like(in[4]);
    auto dS0 = torch::empty({in[0].size(0), in[0].size(1), D, M}, in[2].options());
    AT_DISPATCH_FLOATING_TYPES(in[0].scalar_type(), "gated_delta_recurrence_fused_backward", [&] {
      at::parallel_for(0, BH, head_grain(BH, 3 * T * D * M), [&](int64_t lo, int64_t hi) {
        for (int64_t h = lo; h < hi; ++h) {
          const HeadGrads<scalar_t> g{at_head<scalar_t>(dy, h, T * D), at_head<scalar_t>(dS, h, D * M),
                                      at_head<scalar_t>(dq, h, T * M), at_head<scalar_t>(dk, h, T * M),
                                      at_head<scalar_t>(dv, h, T * D), at_head<scalar_t>(dalpha, h, T),
                                      at_head<scalar_t>(dbeta, h, T),  at_head<scalar_t>(dS0, h, D * M)};
          backward_head(head_at<scalar_t>(in, h), at_head<scalar_t>(checkpoints, h, checkpoints.size(1) * D * M), g);
        }
      });
    });
    return {dq, dk, dv, dalpha, dbeta, dS0};
  }
};

}  // namespace

RecurrenceResult gated_delta_recurrence_fused(const torch::Tensor& q_in, const torch::Tensor& k_in,
                                              const torch::Tensor& v_in, const torch::Tensor& alpha_in,
                                              const torch::Tensor& beta_in, const torch::Tensor& state0_in) {
  // Mixed precision: the recurrence runs in fp32 (its state must).
  const auto q = widened_to_fp32(q_in), k = widened_to_fp32(k_in), v = widened_to_fp32(v_in),
             alpha = widened_to_fp32(alpha_in), beta = widened_to_fp32(beta_in), state0 = widened_to_fp32(state0_in);
  if (!q.device().is_cpu()) return gated_delta_recurrence_naive(q, k, v, alpha, beta, state0);
  auto S0 = state0.defined() ? state0 : torch::zeros({v.size(0), v.size(1), v.size(3), k.size(3)}, v.options());
  auto out = GatedDeltaFunction::apply(q, k, v, alpha, beta, S0);
  return {out[0], out[1]};
}

}  // namespace fwlab::kernels

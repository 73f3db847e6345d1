// Fused CPU kernel of the two-sided decay recurrence (Mao's decay rule; the gated and additive rules are special
// cases) with a hand-written, memory-lean backward:
//   S_t = diag(a_t) S_{t-1} diag(b_t) + v_t k_t^T,   y_t = S_t q_t   (read after write)
//
// Forward, per (batch, head): one pass over D x M per step (about 5 D M flops), keeping only the state of every
// C-th step (the start of each segment) for the backward.
// Backward, segments last to first: recompute the segment's states from its checkpoint into a C-step buffer,
// then walk it backwards with G the gradient of S_t:
//   G += dy_t q_t^T;  dq_t = S_t^T dy_t;  dv_t = G k_t;  dk_t = G^T v_t
//   dlog a_t[i] = a_t[i] sum_j G_ij S_{t-1,ij} b_t[j];  dlog b_t[j] = b_t[j] sum_i a_t[i] G_ij S_{t-1,ij}
//   G <- diag(a_t) G diag(b_t)   (the gradient of S_{t-1})
// States are never reverted by dividing by a decay (a gate near 0 would make that unstable, NOTES.md): they are
// recomputed forward from the checkpoint. Memory: T/C checkpoints of D x M plus one C-step buffer per thread,
// instead of T states.
//
// Each (batch, head) runs independently on the ATen thread pool (OpenMP). The inner loops over the key
// dimension carry `omp simd` reductions, so they vectorise without -ffast-math (measurements below).
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/common/head_grain.h"
#include "kernels/decay/decay.h"
#include "kernels/common/segment_checkpoints.h"
#include "kernels/common/vector_clones.h"

namespace fwlab::kernels {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// One head's tensors. a: D values per step (per value dimension), 1 (scalar per head) or none; b: M or none.
template <typename T>
struct HeadView {
  const T *q, *k, *v, *la, *lb;
  int64_t Tn, M, D, a_width;  // a_width: D, 1 or 0
};

// The decays of step t: a (D entries) and b (M entries), exp of the log-gates; 1 where a gate is absent.
// The hot functions are inlined into per-dtype entry points compiled once per instruction set
// (kernels/common/vector_clones.h). Measured (B4 H4 T1024 D=M=32, fwd+bwd, 2 threads): 10.6 ms with these clones, 12.7
// ms without; the omp simd reductions against plain loops 12.2 vs 22.6 ms, and -fassociative-math -fno-signed-zeros on
// top of them changed nothing (12.9 ms).

template <typename T>
FWLAB_HOT void step_decays(const HeadView<T>& h, int64_t t, T* a, T* b) {
  if (h.a_width == 0)
    std::fill(a, a + h.D, T(1));
  else if (h.a_width == 1)
    std::fill(a, a + h.D, std::exp(h.la[t]));
  else
    for (int64_t i = 0; i < h.D; ++i) a[i] = std::exp(h.la[t * h.D + i]);
  if (!h.lb)
    std::fill(b, b + h.M, T(1));
  else
    for (int64_t j = 0; j < h.M; ++j) b[j] = std::exp(h.lb[t * h.M + j]);
}

// S_out <- diag(a) S_in diag(b) + v_t k_t^T (S_out may be S_in), and (with y) y_t = S_out q_t.
template <typename T>
FWLAB_HOT void advance(const HeadView<T>& h, int64_t t, const T* a, const T* b, const T* S_in, T* S_out, T* y) {
  const T* kt = h.k + t * h.M;
  const T* qt = h.q + t * h.M;
  const T* vt = h.v + t * h.D;
  const int64_t M = h.M;
  for (int64_t i = 0; i < h.D; ++i) {
    const T* Si = S_in + i * M;
    T* So = S_out + i * M;
    const T ai = a[i], vi = vt[i];
    T acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int64_t j = 0; j < M; ++j) {
      const T s = ai * Si[j] * b[j] + vi * kt[j];
      So[j] = s;
      acc += s * qt[j];
    }
    if (y) y[t * h.D + i] = acc;
  }
}

template <typename T>
FWLAB_HOT void forward_head(const HeadView<T>& h, T* S, T* y, T* checkpoints) {
  const int64_t DM = h.D * h.M;
  std::vector<T> a(static_cast<size_t>(h.D)), b(static_cast<size_t>(h.M));
  for (int64_t t = 0; t < h.Tn; ++t) {
    keep_checkpoint(t, S, DM, checkpoints);
    step_decays(h, t, a.data(), b.data());
    advance(h, t, a.data(), b.data(), S, S, y);
  }
}

template <typename T>
FWLAB_HOT void backward_head(const HeadView<T>& h, const T* checkpoints, const T* dy, const T* dS_final, T* dq, T* dk,
                             T* dv, T* dla, T* dlb, T* dS0) {
  const int64_t D = h.D, M = h.M, DM = D * M;
  std::vector<T> G(static_cast<size_t>(DM), T(0)), states;
  std::vector<T> a(static_cast<size_t>(D)), b(static_cast<size_t>(M)), db(static_cast<size_t>(M));
  if (dS_final) std::copy(dS_final, dS_final + DM, G.begin());
  auto recompute = [&](int64_t t, const T* Sprev, T* S) {
    step_decays(h, t, a.data(), b.data());
    advance(h, t, a.data(), b.data(), Sprev, S, static_cast<T*>(nullptr));
  };
  backward_by_segments(h.Tn, DM, checkpoints, states, recompute, [&](int64_t t, const T* Sprev, const T* St) {
    const T* qt = h.q + t * M;
    const T* kt = h.k + t * M;
    const T* vt = h.v + t * D;
    const T* dyt = dy ? dy + t * D : nullptr;
    T* dqt = dq + t * M;
    T* dkt = dk + t * M;
    step_decays(h, t, a.data(), b.data());
    std::fill(dqt, dqt + M, T(0));
    std::fill(dkt, dkt + M, T(0));
    std::fill(db.begin(), db.end(), T(0));
    T da_scalar = 0;
    for (int64_t i = 0; i < D; ++i) {
      T* Gi = G.data() + i * M;
      const T* Sti = St + i * M;
      const T* Spi = Sprev + i * M;
      const T dyi = dyt ? dyt[i] : T(0), vi = vt[i], ai = a[i];
      T dv_acc = 0, da_acc = 0;
      T* dbp = db.data();
      const T* bp = b.data();
#pragma omp simd reduction(+ : dv_acc, da_acc)
      for (int64_t j = 0; j < M; ++j) {
        const T g = Gi[j] + dyi * qt[j];  // gradient of S_t, y_t's read included
        dqt[j] += Sti[j] * dyi;
        dv_acc += g * kt[j];
        dkt[j] += g * vi;
        const T p = g * Spi[j];
        da_acc += p * bp[j];
        dbp[j] += p * ai;
        Gi[j] = g * ai * bp[j];  // gradient of S_{t-1}
      }
      dv[t * D + i] = dv_acc;
      if (h.a_width == 1)
        da_scalar += ai * da_acc;
      else if (h.a_width > 1)
        dla[t * D + i] = ai * da_acc;
    }
    if (h.a_width == 1) dla[t] = da_scalar;
    if (dlb)
      for (int64_t j = 0; j < M; ++j) dlb[t * M + j] = b[j] * db[j];
  });
  std::copy(G.begin(), G.end(), dS0);
}

FWLAB_VECTOR_CLONES void forward_head_entry(const HeadView<float>& h, float* S, float* y, float* checkpoints) {
  forward_head(h, S, y, checkpoints);
}
FWLAB_VECTOR_CLONES void forward_head_entry(const HeadView<double>& h, double* S, double* y, double* checkpoints) {
  forward_head(h, S, y, checkpoints);
}
FWLAB_VECTOR_CLONES void backward_head_entry(const HeadView<float>& h, const float* checkpoints, const float* dy,
                                             const float* dS_final, float* dq, float* dk, float* dv, float* dla,
                                             float* dlb, float* dS0) {
  backward_head(h, checkpoints, dy, dS_final, dq, dk, dv, dla, dlb, dS0);
}
FWLAB_VECTOR_CLONES void backward_head_entry(const HeadView<double>& h, const double* checkpoints, const double* dy,
                                             const double* dS_final, double* dq, double* dk, double* dv, double* dla,
                                             double* dlb, double* dS0) {
  backward_head(h, checkpoints, dy, dS_final, dq, dk, dv, dla, dlb, dS0);
}

template <typename T>
T* ptr_or_null(const torch::Tensor& x, int64_t offset) {
  return x.defined() ? x.data_ptr<T>() + offset : nullptr;
}

struct Sizes {
  int64_t B, H, T, M, D, a_width;
};

Sizes sizes_of(const torch::Tensor& q, const torch::Tensor& v, const torch::Tensor& log_a) {
  return {q.size(0), q.size(1), q.size(2), q.size(3), v.size(3), log_a.defined() ? log_a.size(3) : 0};
}

template <typename T>
HeadView<T> head_view(const Sizes& s, int64_t h, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                      const torch::Tensor& la, const torch::Tensor& lb) {
  return {q.data_ptr<T>() + h * s.T * s.M,
          k.data_ptr<T>() + h * s.T * s.M,
          v.data_ptr<T>() + h * s.T * s.D,
          ptr_or_null<T>(la, h * s.T * s.a_width),
          ptr_or_null<T>(lb, h * s.T * s.M),
          s.T,
          s.M,
          s.D,
          s.a_width};
}

torch::Tensor contiguous_or_undefined(const torch::Tensor& x) { return x.defined() ? x.contiguous() : x; }

// An absent gate travels through autograd as an empty tensor (a custom Function takes no undefined inputs).
torch::Tensor absent_if_empty(const torch::Tensor& x) { return x.numel() == 0 ? torch::Tensor() : x.contiguous(); }

struct Forward {
  torch::Tensor q, k, v, log_a, log_b, y, S, checkpoints;
};

// The forward pass over contiguous inputs; the segment checkpoints (the backward's) only when asked for.
Forward run_forward(const torch::Tensor& q_in, const torch::Tensor& k_in, const torch::Tensor& v_in,
                    const torch::Tensor& log_a, const torch::Tensor& log_b, const torch::Tensor& S0, bool checkpoints) {
  Forward f{q_in.contiguous(), k_in.contiguous(), v_in.contiguous(), absent_if_empty(log_a), absent_if_empty(log_b)};
  const auto s = sizes_of(f.q, f.v, f.log_a);
  f.S = S0.contiguous().clone();
  f.y = torch::empty({s.B, s.H, s.T, s.D}, f.v.options());
  if (checkpoints) f.checkpoints = torch::empty({s.B, s.H, segment_count(s.T), s.D, s.M}, f.v.options());
  AT_DISPATCH_FLOATING_TYPES(f.q.scalar_type(), "decay_recurrence_fused", [&] {
    at::parallel_for(0, s.B * s.H, head_grain(s.B * s.H, s.T * s.D * s.M), [&](int64_t lo, int64_t hi) {
      for (int64_t h = lo; h < hi; ++h)
        forward_head_entry(
            head_view<scalar_t>(s, h, f.q, f.k, f.v, f.log_a, f.log_b), f.S.data_ptr<scalar_t>() + h * s.D * s.M,
            f.y.data_ptr<scalar_t>() + h * s.T * s.D,
            checkpoints ? f.checkpoints.data_ptr<scalar_t>() + h * f.checkpoints.size(2) * s.D * s.M : nullptr);
    });
  });
  return f;
}

struct DecayFunction : public torch::autograd::Function<DecayFunction> {
  static variable_list forward(AutogradContext* ctx, torch::Tensor q, torch::Tensor k, torch::Tensor v,
                               torch::Tensor log_a, torch::Tensor log_b, torch::Tensor S0) {
    auto f = run_forward(q, k, v, log_a, log_b, S0, true);
    ctx->save_for_backward({f.q, f.k, f.v, f.log_a.defined() ? f.log_a : torch::empty({0}, f.v.options()),
                            f.log_b.defined() ? f.log_b : torch::empty({0}, f.v.options()), f.checkpoints});
    return {f.y, f.S};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &checkpoints = saved[5];
    const auto log_a = absent_if_empty(saved[3]), log_b = absent_if_empty(saved[4]);
    const auto s = sizes_of(q, v, log_a);
    auto dy = contiguous_or_undefined(grads[0]);
    auto dS = contiguous_or_undefined(grads[1]);
    auto dq = torch::empty_like(q), dk = torch::empty_like(k), dv = torch::empty_like(v);
    auto dla = log_a.defined() ? torch::empty_like(log_a) : torch::Tensor();
    auto dlb = log_b.defined() ? torch::empty_like(log_b) : torch::Tensor();
    auto dS0 = torch::empty({s.B, s.H, s.D, s.M}, v.options());
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "decay_recurrence_fused_backward", [&] {
      at::parallel_for(0, s.B * s.H, head_grain(s.B * s.H, 3 * s.T * s.D * s.M), [&](int64_t lo, int64_t hi) {
        for (int64_t h = lo; h < hi; ++h)
          backward_head_entry(head_view<scalar_t>(s, h, q, k, v, log_a, log_b),
                              checkpoints.data_ptr<scalar_t>() + h * checkpoints.size(2) * s.D * s.M,
                              ptr_or_null<scalar_t>(dy, h * s.T * s.D), ptr_or_null<scalar_t>(dS, h * s.D * s.M),
                              dq.data_ptr<scalar_t>() + h * s.T * s.M, dk.data_ptr<scalar_t>() + h * s.T * s.M,
                              dv.data_ptr<scalar_t>() + h * s.T * s.D, ptr_or_null<scalar_t>(dla, h * s.T * s.a_width),
                              ptr_or_null<scalar_t>(dlb, h * s.T * s.M), dS0.data_ptr<scalar_t>() + h * s.D * s.M);
      });
    });
    return {dq, dk, dv, dla, dlb, dS0};
  }
};

}  // namespace

RecurrenceResult decay_recurrence_fused(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                        const torch::Tensor& log_a, const torch::Tensor& log_b,
                                        const torch::Tensor& state0) {
  // The chunked form is the path on other devices (matmul-friendly on GPUs).
  if (!q.device().is_cpu()) return decay_recurrence_chunked(q, k, v, log_a, log_b, state0, 16);
  TORCH_CHECK(q.dim() == 4 && k.sizes() == q.sizes() && v.dim() == 4 && v.size(2) == q.size(2),
              "decay_recurrence_fused: bad shapes");
  TORCH_CHECK(!log_a.defined() || log_a.size(3) == v.size(3) || log_a.size(3) == 1,
              "decay_recurrence_fused: log_a must be [B, H, T, D] or [B, H, T, 1]");
  TORCH_CHECK(!log_b.defined() || log_b.sizes() == q.sizes(), "decay_recurrence_fused: log_b must be [B, H, T, M]");
  auto S0 = state0.defined() ? state0 : torch::zeros({v.size(0), v.size(1), v.size(3), k.size(3)}, v.options());
  // Without gradients (generation, evaluation): no autograd node and no checkpoints, a decode step's few ops.
  if (!gradients_needed({q, k, v, log_a, log_b, S0})) {
    auto f = run_forward(q, k, v, log_a, log_b, S0, false);
    return {f.y, f.S};
  }
  const auto absent = torch::empty({0}, v.options());
  auto out = DecayFunction::apply(q, k, v, log_a.defined() ? log_a : absent, log_b.defined() ? log_b : absent, S0);
  return {out[0], out[1]};
}

}  // namespace fwlab::kernels

// The fused recurrent decay kernel for CUDA, row by row: the code both the GPU kernel (fused.cu, one thread
// per state row) and the host run, so that its arithmetic is checked on any machine against the libtorch naive
// twin (tests/test_kernels.cpp, float64) and the GPU only has to match this host run (tests/cuda/).
//
//   S_t = diag(a_t) S_{t-1} diag(b_t) + v_t k_t^T,   y_t = S_t q_t   (the contract of kernels/decay/decay.h)
//
// Row i of S evolves alone: S_t[i, :] = a_t[i] S_{t-1}[i, :] * b_t + v_t[i] k_t, and y_t[i] = S_t[i, :] . q_t.
// So a thread owns one row for the whole sequence: the reference kernel's style (one pass over time), but with
// this project's memory-lean backward: the forward keeps the row every kSegment steps, the backward recomputes a
// segment from it (never dividing by a decay) and walks it backwards. Gradients of the tensors all rows share
// (q, k, the key-side gate, a per-head value gate) are summed over rows through `add` (atomicAdd on the GPU).
// No row lives in a per-thread array: a thread's running row is its row of the output buffer (state_out forward,
// dstate0 backward) and a recomputed segment lives in a caller-given workspace, laid out so that the threads of a
// block (consecutive rows i) touch consecutive addresses. Per-thread arrays of M values went to local memory, a
// 9 KB (fp32) / 18 KB (fp64) stack frame that the driver reserves for every resident thread outside PyTorch's
// allocator; the workspace is an ordinary tensor instead.
// Plain C++: no libtorch, no CUDA headers needed on the host.
#pragma once

#include <math.h>

#include <cstdint>

#if defined(__CUDACC__)
#define FWLAB_HD __host__ __device__
#else
#define FWLAB_HD
#endif

namespace fwlab::cuda {

constexpr int kSegment = 16;  // steps between kept rows (as the CPU fused kernel)

// B * H independent heads, buffers contiguous as [heads, steps, ...]:
//   q, k [heads, steps, M]; v [heads, steps, D]; log_a [heads, steps, a_width] with a_width D, 1 or 0 (null: a = 1);
//   log_b [heads, steps, M] or null (b = 1); state0 [heads, D, M] or null (zeros).
template <typename T>
struct DecayProblem {
  const T *q = nullptr, *k = nullptr, *v = nullptr, *log_a = nullptr, *log_b = nullptr, *state0 = nullptr;
  int64_t heads = 0, steps = 0, D = 0, M = 0, a_width = 0;

  FWLAB_HD int64_t segments() const { return steps > 0 ? (steps + kSegment - 1) / kSegment : 1; }
  FWLAB_HD T a(int64_t h, int64_t t, int64_t i) const {
    if (a_width == 0) return T(1);
    return exp(log_a[(h * steps + t) * a_width + (a_width == 1 ? 0 : i)]);
  }
  FWLAB_HD T b(int64_t h, int64_t t, int64_t j) const { return log_b ? exp(log_b[(h * steps + t) * M + j]) : T(1); }
  // Where row i of head h's checkpoint of segment s lies in a [heads, segments, D, M] buffer.
  FWLAB_HD int64_t checkpoint_row(int64_t h, int64_t s, int64_t i) const { return ((h * segments() + s) * D + i) * M; }
  // The backward's workspace [heads, kSegment + 1, M, D]: element j of the n-th recomputed row of row i.
  FWLAB_HD int64_t workspace_at(int64_t h, int64_t n, int64_t i, int64_t j) const {
    return ((h * (kSegment + 1) + n) * M + j) * D + i;
  }
  FWLAB_HD int64_t workspace_size() const { return heads * (kSegment + 1) * M * D; }
};

// Outputs of the forward: y [heads, steps, D], the final state [heads, D, M], checkpoints [heads, segments, D, M].
template <typename T>
FWLAB_HD void decay_row_forward(const DecayProblem<T>& p, int64_t h, int64_t i, T* y, T* state_out, T* checkpoints) {
  const int64_t M = p.M;
  T* S = state_out + (h * p.D + i) * M;  // the running row: its final value is the output
  for (int64_t j = 0; j < M; ++j) S[j] = p.state0 ? p.state0[(h * p.D + i) * M + j] : T(0);
  for (int64_t t = 0; t < p.steps; ++t) {
    if (t % kSegment == 0) {
      T* keep = checkpoints + p.checkpoint_row(h, t / kSegment, i);
      for (int64_t j = 0; j < M; ++j) keep[j] = S[j];
    }
    const T ai = p.a(h, t, i), vi = p.v[(h * p.steps + t) * p.D + i];
    const T* kt = p.k + (h * p.steps + t) * M;
    const T* qt = p.q + (h * p.steps + t) * M;
    T acc = 0;
    for (int64_t j = 0; j < M; ++j) {
      S[j] = ai * S[j] * p.b(h, t, j) + vi * kt[j];
      acc += S[j] * qt[j];
    }
    y[(h * p.steps + t) * p.D + i] = acc;
  }
  if (p.steps == 0) {  // one (empty) segment still holds the initial row
    T* keep = checkpoints + p.checkpoint_row(h, 0, i);
    for (int64_t j = 0; j < M; ++j) keep[j] = S[j];
  }
}

// Gradients. Written per row: dv [heads, steps, D], dlog_a when a_width = D, dstate0 [heads, D, M]. Summed over
// rows with `add` (the caller zeroes them first): dq, dk [heads, steps, M], dlog_b, dlog_a when a_width = 1.
// dy and dstate_final may be null (no gradient reaches y / the final state). workspace: workspace_size() values.
template <typename T>
struct DecayGrads {
  const T *dy = nullptr, *dstate_final = nullptr;
  T *dq = nullptr, *dk = nullptr, *dv = nullptr, *dlog_a = nullptr, *dlog_b = nullptr, *dstate0 = nullptr;
  T* workspace = nullptr;
};

struct AddPlain {
  template <typename T>
  FWLAB_HD void operator()(T* at, T value) const {
    *at += value;
  }
};

template <typename T, typename Add>
FWLAB_HD void decay_row_backward(const DecayProblem<T>& p, int64_t h, int64_t i, const T* checkpoints,
                                 const DecayGrads<T>& g, Add add) {
  const int64_t M = p.M, D = p.D;
  T* G = g.dstate0 + (h * D + i) * M;  // gradient of S_t[i, :], walking t backwards; at the end dstate0's row
  auto row = [&](int64_t n, int64_t j) -> T& {
    return g.workspace[p.workspace_at(h, n, i, j)];
  };  // n: S_{start + n - 1}
  for (int64_t j = 0; j < M; ++j) G[j] = g.dstate_final ? g.dstate_final[(h * D + i) * M + j] : T(0);
  for (int64_t seg = p.segments() - 1; seg >= 0; --seg) {
    const int64_t start = seg * kSegment, end = start + kSegment < p.steps ? start + kSegment : p.steps;
    const T* keep = checkpoints + p.checkpoint_row(h, seg, i);
    for (int64_t j = 0; j < M; ++j) row(0, j) = keep[j];
    for (int64_t t = start; t < end; ++t) {  // recompute the segment forward from its checkpoint
      const T ai = p.a(h, t, i), vi = p.v[(h * p.steps + t) * D + i];
      const T* kt = p.k + (h * p.steps + t) * M;
      for (int64_t j = 0; j < M; ++j) row(t - start + 1, j) = ai * row(t - start, j) * p.b(h, t, j) + vi * kt[j];
    }
    for (int64_t t = end - 1; t >= start; --t) {
      const int64_t at = h * p.steps + t, n = t - start + 1;  // S_t is row n, S_{t-1} row n - 1
      const T ai = p.a(h, t, i), vi = p.v[at * D + i], dyi = g.dy ? g.dy[at * D + i] : T(0);
      const T* kt = p.k + at * M;
      const T* qt = p.q + at * M;
      T dv = 0, da = 0;
      for (int64_t j = 0; j < M; ++j) {
        const T bj = p.b(h, t, j);
        const T grad = G[j] + dyi * qt[j];  // gradient of S_t, y_t's read included
        add(g.dq + at * M + j, row(n, j) * dyi);
        add(g.dk + at * M + j, grad * vi);
        dv += grad * kt[j];
        const T through = grad * row(n - 1, j);
        da += through * bj;
        if (g.dlog_b) add(g.dlog_b + at * M + j, through * ai * bj);
        G[j] = grad * ai * bj;  // gradient of S_{t-1}
      }
      g.dv[at * D + i] = dv;
      if (p.a_width == 1)
        add(g.dlog_a + at, ai * da);
      else if (p.a_width > 1)
        g.dlog_a[at * D + i] = ai * da;
    }
  }
}

}  // namespace fwlab::cuda

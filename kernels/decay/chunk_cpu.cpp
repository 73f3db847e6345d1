// The chunked decay programs on the CPU (kernels/decay/chunk_cpu.h states the algebra): one head at a time to
// each thread of the ATen pool (kernels/common/head_queue.h), the loops between the products
// (kernels/common/small_gemm_cpu.h) cloned per instruction set (kernels/common/vector_clones.h).
#include "kernels/decay/chunk_cpu.h"

#include <algorithm>
#include <vector>

#include "kernels/common/cpu_blas.h"
#include "kernels/common/head_queue.h"
#include "kernels/common/small_gemm_cpu.h"
#include "kernels/common/vector_clones.h"

namespace fwlab::kernels::decay_blas {

namespace {

constexpr int64_t kSub = 16;

// One head's rows of the problem; a, b the per-step gates (null: 1).
template <typename T>
struct Head {
  const T *q, *k, *v, *dy, *a, *b, *state0, *dstate_final;
  int64_t steps, D, M, aw;
  T a_at(int64_t t, int64_t i) const { return a ? a[t * aw + (aw == 1 ? 0 : i)] : T(1); }
  T b_at(int64_t t, int64_t j) const { return b ? b[t * M + j] : T(1); }
};

// One sub-chunk's gates and scaled rows (scratch for kSub steps): ga, gb each step's gates (D and M wide: a scalar
// or absent gate spelled out, so that every loop below is plain and vectorises); al, bl: alpha_t, beta_t from the
// start; ae, be: alpha_e / alpha_s, beta_e / beta_s to the end; Qb = beta * q, Vend = ae * v, Kend = be * k; Gb, Ga:
// one pair's ratios.
template <typename T>
struct Sub {
  int64_t t0 = 0, c = 0, D, M;
  std::vector<T> ga, gb, al, bl, ae, be, Qb, Vend, Kend, Ady, Ga, Gb;
  Sub(int64_t D_, int64_t M_)
      : D(D_),
        M(M_),
        ga(kSub * D_),
        gb(kSub * M_),
        al(kSub * D_),
        bl(kSub * M_),
        ae(kSub * D_),
        be(kSub * M_),
        Qb(kSub * M_),
        Vend(kSub * D_),
        Kend(kSub * M_),
        Ady(kSub * D_),
        Ga(D_),
        Gb(M_) {}
};

template <typename T>
FWLAB_HOT void prepare(const Head<T>& h, int64_t t0, Sub<T>& w) {
  w.t0 = t0, w.c = std::min(kSub, h.steps - t0);
  const int64_t c = w.c, D = h.D, M = h.M;
  for (int64_t t = 0; t < c; ++t) {
    for (int64_t i = 0; i < D; ++i) w.ga[t * D + i] = h.a_at(t0 + t, i);
    for (int64_t j = 0; j < M; ++j) w.gb[t * M + j] = h.b_at(t0 + t, j);
  }
  std::copy(w.ga.begin(), w.ga.begin() + D, w.al.begin());
  std::copy(w.gb.begin(), w.gb.begin() + M, w.bl.begin());
  for (int64_t t = 1; t < c; ++t) {
    for (int64_t i = 0; i < D; ++i) w.al[t * D + i] = w.al[(t - 1) * D + i] * w.ga[t * D + i];
    for (int64_t j = 0; j < M; ++j) w.bl[t * M + j] = w.bl[(t - 1) * M + j] * w.gb[t * M + j];
  }
  std::fill(w.ae.begin() + (c - 1) * D, w.ae.begin() + c * D, T(1));
  std::fill(w.be.begin() + (c - 1) * M, w.be.begin() + c * M, T(1));
  for (int64_t s = c - 2; s >= 0; --s) {
    for (int64_t i = 0; i < D; ++i) w.ae[s * D + i] = w.ae[(s + 1) * D + i] * w.ga[(s + 1) * D + i];
    for (int64_t j = 0; j < M; ++j) w.be[s * M + j] = w.be[(s + 1) * M + j] * w.gb[(s + 1) * M + j];
  }
  const T *q = h.q + t0 * M, *k = h.k + t0 * M, *v = h.v + t0 * D;
  for (int64_t t = 0; t < c; ++t) {
    for (int64_t j = 0; j < M; ++j)
      w.Qb[t * M + j] = w.bl[t * M + j] * q[t * M + j], w.Kend[t * M + j] = w.be[t * M + j] * k[t * M + j];
    for (int64_t i = 0; i < D; ++i) w.Vend[t * D + i] = w.ae[t * D + i] * v[t * D + i];
  }
}

// S (D x M) from the sub-chunk's start to its end.
template <typename T>
FWLAB_HOT void advance(const Sub<T>& w, T* S) {
  const int64_t c = w.c, D = w.D, M = w.M;
  for (int64_t i = 0; i < D; ++i) {
    const T ai = w.al[(c - 1) * D + i];
    for (int64_t j = 0; j < M; ++j) S[i * M + j] *= ai * w.bl[(c - 1) * M + j];
  }
  small_gemm<T>(true, false, D, M, c, 1, w.Vend.data(), D, w.Kend.data(), M, 1, S, M);
}

// For each pair s < t of the sub-chunk, f(s, t, Gb, Ga) with Gb = beta_t / beta_s, Ga = alpha_t / alpha_s.
template <typename T, typename F>
FWLAB_HOT void each_pair(Sub<T>& w, F&& f) {
  const int64_t c = w.c, D = w.D, M = w.M;
  for (int64_t s = 0; s < c; ++s) {
    std::fill(w.Gb.begin(), w.Gb.end(), T(1));
    std::fill(w.Ga.begin(), w.Ga.end(), T(1));
    for (int64_t t = s + 1; t < c; ++t) {
      for (int64_t j = 0; j < M; ++j) w.Gb[j] *= w.gb[t * M + j];
      for (int64_t i = 0; i < D; ++i) w.Ga[i] *= w.ga[t * D + i];
      f(s, t, w.Gb.data(), w.Ga.data());
    }
  }
}

template <typename T>
FWLAB_HOT T dot(const T* x, const T* y, const T* g, int64_t n) {
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) sum += x[j] * y[j] * g[j];
  return sum;
}

template <typename T>
FWLAB_HOT void axpy(T coef, const T* g, const T* x, T* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] += coef * g[j] * x[j];
}

// y rows of the sub-chunk (without the diagonal pair), and S advanced.
template <typename T>
FWLAB_HOT void forward_sub(const Head<T>& h, Sub<T>& w, T* S, T* y) {
  const int64_t c = w.c, D = w.D, M = w.M;
  small_gemm<T>(false, true, c, D, M, 1, w.Qb.data(), M, S, M, 0, y, D);
  for (int64_t t = 0; t < c; ++t)
    for (int64_t i = 0; i < D; ++i) y[t * D + i] *= w.al[t * D + i];
  const T *q = h.q + w.t0 * M, *k = h.k + w.t0 * M, *v = h.v + w.t0 * D;
  each_pair(w, [&](int64_t s, int64_t t, const T* Gb, const T* Ga) {
    axpy(dot(q + t * M, k + s * M, Gb, M), Ga, v + s * D, y + t * D, D);
  });
  advance(w, S);
}

// dq, dk, dv rows of the sub-chunk (without the diagonal pair); dS: the gradient of its end state on entry, of its
// start state on exit.
template <typename T>
FWLAB_HOT void backward_sub(const Head<T>& h, Sub<T>& w, const T* S, T* dS, T* dq, T* dk, T* dv) {
  const int64_t c = w.c, D = w.D, M = w.M;
  const T *q = h.q + w.t0 * M, *k = h.k + w.t0 * M, *v = h.v + w.t0 * D, *dy = h.dy + w.t0 * D;
  for (int64_t t = 0; t < c; ++t)
    for (int64_t i = 0; i < D; ++i) w.Ady[t * D + i] = w.al[t * D + i] * dy[t * D + i];
  small_gemm<T>(false, false, c, M, D, 1, w.Ady.data(), D, S, M, 0, dq, M);
  small_gemm<T>(false, false, c, M, D, 1, w.Vend.data(), D, dS, M, 0, dk, M);
  small_gemm<T>(false, true, c, D, M, 1, w.Kend.data(), M, dS, M, 0, dv, D);
  for (int64_t t = 0; t < c; ++t) {
    for (int64_t j = 0; j < M; ++j) dq[t * M + j] *= w.bl[t * M + j], dk[t * M + j] *= w.be[t * M + j];
    for (int64_t i = 0; i < D; ++i) dv[t * D + i] *= w.ae[t * D + i];
  }
  each_pair(w, [&](int64_t s, int64_t t, const T* Gb, const T* Ga) {
    const T P = dot(q + t * M, k + s * M, Gb, M), R = dot(dy + t * D, v + s * D, Ga, D);
    axpy(R, Gb, k + s * M, dq + t * M, M);
    axpy(R, Gb, q + t * M, dk + s * M, M);
    axpy(P, Ga, dy + t * D, dv + s * D, D);
  });
  for (int64_t i = 0; i < D; ++i) {
    const T ai = w.al[(c - 1) * D + i];
    for (int64_t j = 0; j < M; ++j) dS[i * M + j] *= ai * w.bl[(c - 1) * M + j];
  }
  small_gemm<T>(true, false, D, M, c, 1, w.Ady.data(), D, w.Qb.data(), M, 1, dS, M);
}

template <typename T>
FWLAB_HOT void forward_head(const Head<T>& h, T* y, T* states) {
  Sub<T> w(h.D, h.M);
  const int64_t DM = h.D * h.M;
  std::copy(h.state0, h.state0 + DM, states);
  std::vector<T> S(h.state0, h.state0 + DM);
  for (int64_t t0 = 0; t0 < h.steps; t0 += kSub) {
    prepare(h, t0, w);
    forward_sub(h, w, S.data(), y + t0 * h.D);
    if ((t0 + kSub) % cuda::kChunk == 0) std::copy(S.begin(), S.end(), states + (t0 + kSub) / cuda::kChunk * DM);
  }
}

template <typename T>
FWLAB_HOT void backward_head(const Head<T>& h, T* states, T* dstates, T* dq, T* dk, T* dv) {
  Sub<T> w(h.D, h.M);
  const int64_t DM = h.D * h.M, chunks = h.steps / cuda::kChunk, subs = cuda::kChunk / kSub;
  std::copy(h.state0, h.state0 + DM, states);
  for (int64_t n = 0; n < chunks; ++n) {  // the chunk-start states again
    std::copy(states + n * DM, states + (n + 1) * DM, states + (n + 1) * DM);
    for (int64_t u = 0; u < subs; ++u) prepare(h, n * cuda::kChunk + u * kSub, w), advance(w, states + (n + 1) * DM);
  }
  std::vector<T> dS(DM, T(0)), starts(subs * DM);
  if (h.dstate_final) std::copy(h.dstate_final, h.dstate_final + DM, dS.begin());
  std::copy(dS.begin(), dS.end(), dstates + chunks * DM);
  for (int64_t n = chunks - 1; n >= 0; --n) {
    std::copy(states + n * DM, states + (n + 1) * DM, starts.begin());  // the sub-chunk states of chunk n
    for (int64_t u = 1; u < subs; ++u) {
      std::copy(starts.begin() + (u - 1) * DM, starts.begin() + u * DM, starts.begin() + u * DM);
      prepare(h, n * cuda::kChunk + (u - 1) * kSub, w), advance(w, starts.data() + u * DM);
    }
    for (int64_t u = subs - 1; u >= 0; --u) {
      const int64_t t0 = n * cuda::kChunk + u * kSub;
      prepare(h, t0, w);
      backward_sub(h, w, starts.data() + u * DM, dS.data(), dq + t0 * h.M, dk + t0 * h.M, dv + t0 * h.D);
    }
    std::copy(dS.begin(), dS.end(), dstates + n * DM);
  }
}

template <typename T>
Head<T> head_of(const cuda::ChunkProblem<T, T>& p, StepGates<T> g, int64_t n) {
  const int64_t rows = n * p.steps, DM = p.D * p.M;
  return {p.q + rows * p.M,
          p.k + rows * p.M,
          p.v + rows * p.D,
          p.dy ? p.dy + rows * p.D : nullptr,
          g.a ? g.a + rows * p.a_width : nullptr,
          g.b ? g.b + rows * p.M : nullptr,
          p.state0 + n * DM,
          p.dstate_final ? p.dstate_final + n * DM : nullptr,
          p.steps,
          p.D,
          p.M,
          p.a_width};
}

FWLAB_VECTOR_CLONES void forward_entry(const Head<float>& h, float* y, float* states) { forward_head(h, y, states); }
FWLAB_VECTOR_CLONES void forward_entry(const Head<double>& h, double* y, double* states) { forward_head(h, y, states); }
FWLAB_VECTOR_CLONES void backward_entry(const Head<float>& h, float* states, float* dstates, float* dq, float* dk,
                                        float* dv) {
  backward_head(h, states, dstates, dq, dk, dv);
}
FWLAB_VECTOR_CLONES void backward_entry(const Head<double>& h, double* states, double* dstates, double* dq, double* dk,
                                        double* dv) {
  backward_head(h, states, dstates, dq, dk, dv);
}

}  // namespace

template <typename T>
void forward(const cuda::ChunkProblem<T, T>& p, StepGates<T> gates, T* y, T* states) {
  const int64_t per_state = (p.chunks() + 1) * p.D * p.M;
  for_each_head_queued(
      p.heads, [&](int64_t n) { forward_entry(head_of(p, gates, n), y + n * p.steps * p.D, states + n * per_state); });
}

template <typename T>
void backward(const cuda::ChunkProblem<T, T>& p, StepGates<T> gates, T* states, T* dstates, T* dq, T* dk, T* dv) {
  const int64_t per_state = (p.chunks() + 1) * p.D * p.M;
  for_each_head_queued(p.heads, [&](int64_t n) {
    backward_entry(head_of(p, gates, n), states + n * per_state, dstates + n * per_state, dq + n * p.steps * p.M,
                   dk + n * p.steps * p.M, dv + n * p.steps * p.D);
  });
}

template void forward<float>(const cuda::ChunkProblem<float, float>&, StepGates<float>, float*, float*);
template void forward<double>(const cuda::ChunkProblem<double, double>&, StepGates<double>, double*, double*);
template void backward<float>(const cuda::ChunkProblem<float, float>&, StepGates<float>, float*, float*, float*, float*,
                              float*);
template void backward<double>(const cuda::ChunkProblem<double, double>&, StepGates<double>, double*, double*, double*,
                               double*, double*);

}  // namespace fwlab::kernels::decay_blas

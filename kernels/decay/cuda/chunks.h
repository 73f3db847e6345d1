// The chunked decay kernel's block programs: the code both the CUDA kernels (chunks.cu, one thread block per
// program) and the host run (kernels/decay/cuda/chunks_host.h, threads emulating a block), so that the arithmetic and
// the barriers are checked in float64 on any machine (tests/test_kernels.cpp) and the GPU only adds the tensor-core
// products and the parallel launch.
//
//   S_t = diag(a_t) S_{t-1} diag(b_t) + v_t k_t^T,   y_t = S_t q_t   (the contract of kernels/decay/decay.h)
//
// Time is cut into chunks of kChunk steps and chunks into sub-chunks of kSub. With A, B the log-gates summed from
// the chunk's start (A_t = sum_{r<=t} log a_r, non-increasing), the state at each chunk start S_n and:
//   y_t = e^{A_t} * (S_n (e^{B_t} * q_t)) + sum_{s<t} P[t,s] e^{A_t - A_s} * v_s   [+ P[t,t] v_t, see below],
//   P[t,s] = sum_j q_tj k_sj e^{B_tj - B_sj},
//   S_{n+1} = e^{A_end} * S_n * e^{B_end} + sum_s (e^{A_end - A_s} * v_s)(e^{B_end - B_s} * k_s)^T.
// Every exponent is <= 0: within a sub-chunk the pairs are summed exactly with their own difference;
// between sub-chunks the difference is split at a reference step r between them (s <= r < t), e^{G_t - G_r} and
// e^{G_r - G_s}, both <= 0, which turns the pair sums into matrix products (tensor cores on the GPU, in bf16/fp16
// with fp32 accumulation). This is the two-level chunking of flash-linear-attention's GLA, with gates on both sides.
//
// Backward (no S_t kept): the chunk-start states are recomputed by the same scan, the gradients dH_n of the
// chunk-start states come from a reverse scan, and then each chunk's dq, dk, dv are products of the same form:
//   dq_t = e^{B_t} * (S_n^T (e^{A_t} * dy_t)) + sum_{s<t} R[t,s] e^{B_t - B_s} * k_s,   R[t,s] = sum_i dy_ti v_si
//   e^{A_ti - A_si} dk_s = e^{B_end - B_s} * (dH_{n+1}^T (e^{A_end - A_s} * v_s)) + sum_{t>s} R[t,s] e^{B_t - B_s} *
//   q_t dv_s = e^{A_end - A_s} * (dH_{n+1} (e^{B_end - B_s} * k_s)) + sum_{t>s} P[t,s] e^{A_t - A_s} * dy_t
// The programs leave out the diagonal pair s = t (no gate acts on it): the binding adds P[t,t] v_t to y, R[t,t] k_t
// to dq, and so on, in the accumulation type. The gates' gradients come from these sums without the diagonal: its
// terms cancel exactly, element by element, in q * dq - k * dk and y * dy - v * dv, so they are left out rather
// than computed and cancelled in rounded arithmetic.
// The gates' gradients follow from these without any chunk bookkeeping (kernels/decay/chunk_cuda.cpp).
// Plain C++ on the host: no libtorch, no CUDA headers.
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/decay/cuda/rows.h"  // FWLAB_HD

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <type_traits>
#endif

namespace fwlab::cuda {

constexpr int kChunk = 64;         // steps per chunk: one thread block's share of the sequence
constexpr int kSub = 16;           // steps per sub-chunk: pairs inside one are summed exactly, between them by products
constexpr int64_t kScanRows = 16;  // state rows per scan block (the binding pads D to a multiple of 16)

// The problem after the binding's preparation: steps padded to a multiple of kChunk, gates summed from each chunk
// start (in Acc, fp32 or fp64). In: the type of q, k, v, dy (bf16, fp16, fp32 or fp64); Acc: states, gates, sums.
//   q, k [heads, steps, M]; v, dy [heads, steps, D]; A [heads, steps, a_width] (a_width D or 1; null: a = 1);
//   B [heads, steps, M] (null: b = 1); state0, dstate_final [heads, D, M] (null: zeros).
template <typename In, typename Acc>
struct ChunkProblem {
  const In *q = nullptr, *k = nullptr, *v = nullptr, *dy = nullptr;
  const Acc *A = nullptr, *B = nullptr, *state0 = nullptr, *dstate_final = nullptr;
  int64_t heads = 0, steps = 0, D = 0, M = 0, a_width = 0;

  FWLAB_HD int64_t chunks() const { return steps / kChunk; }
  FWLAB_HD int64_t at(int64_t h, int64_t n, int64_t t) const { return h * steps + n * kChunk + t; }  // a step's row
  // The gates of head h, chunk n, local step t, column i (0 without a gate).
  FWLAB_HD Acc a_log(int64_t h, int64_t n, int64_t t, int64_t i) const {
    return A ? A[at(h, n, t) * a_width + (a_width == 1 ? 0 : i)] : Acc(0);
  }
  FWLAB_HD Acc b_log(int64_t h, int64_t n, int64_t t, int64_t j) const { return B ? B[at(h, n, t) * M + j] : Acc(0); }
  // A state-sized buffer [heads, chunks + 1, D, M]: the state (or its gradient) at the start of chunk n.
  FWLAB_HD int64_t state_at(int64_t h, int64_t n) const { return (h * (chunks() + 1) + n) * D * M; }
};

// The calling block: a thread index, the block's size and its barrier: __syncthreads on the GPU; on the host a
// barrier of the threads that emulate a block (kernels/decay/cuda/chunks_host.h), or none for one thread.
struct BlockCtx {
  int tid = 0, threads = 1;
  void (*host_wait)(void*) = nullptr;
  void* host_barrier = nullptr;
  // Host only: the warps' exchange that stands in for the tensor-core instruction (kernels/cuda/warp_mma_host.h).
  void (*host_mma)(void* warps, int tid, const double* a, const double* b, double* c) = nullptr;
  void* host_warps = nullptr;
  FWLAB_HD int lane() const { return tid & 31; }
  FWLAB_HD int warp() const { return tid >> 5; }
  FWLAB_HD int warps() const { return threads >> 5; }  // whole warps only: the tensor-core programs need them
  FWLAB_HD void sync() const {
#if defined(__CUDA_ARCH__)
    __syncthreads();
#else
    if (host_wait) host_wait(host_barrier);
#endif
  }
};

FWLAB_HD inline int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }

// e^x in the accumulation type: expf for fp32 (an unqualified exp could resolve to the double one on the GPU).
FWLAB_HD inline float exp_acc(float x) { return expf(x); }
FWLAB_HD inline double exp_acc(double x) { return exp(x); }

// x * 2^e and the exponent of x (x = f 2^e, |f| in [0.5, 1)), in the accumulation type.
FWLAB_HD inline float scaled_acc(float x, int e) { return ldexpf(x, e); }
FWLAB_HD inline double scaled_acc(double x, int e) { return ldexp(x, e); }
FWLAB_HD inline int exponent_acc(float x) {
  int e = 0;
  frexpf(x, &e);
  return e;
}
FWLAB_HD inline int exponent_acc(double x) {
  int e = 0;
  frexp(x, &e);
  return e;
}

template <typename To, typename From>
FWLAB_HD To convert(From x) {
  return static_cast<To>(x);
}
#if defined(__CUDACC__)
template <>
FWLAB_HD inline __nv_bfloat16 convert<__nv_bfloat16, float>(float x) {
  return __float2bfloat16(x);
}
template <>
FWLAB_HD inline __half convert<__half, float>(float x) {
  return __float2half(x);
}
template <>
FWLAB_HD inline float convert<float, __nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <>
FWLAB_HD inline float convert<float, __half>(__half x) {
  return __half2float(x);
}
#endif

// Scratch of one block program, carved from one buffer (shared memory on the GPU): P and R [kChunk, kChunk], out
// and tmp [kChunk, W], two operand stages [max(kChunk, W), W] of type Stage (what the products read; a stage holds
// a state-sized [W, W] operand too), W = round16(max(D, M)).
template <typename Stage, typename Acc>
struct Scratch {
  Acc *P, *R, *out, *tmp;
  Stage *a, *b;
  int64_t W;

  FWLAB_HD static int64_t width(int64_t D, int64_t M) { return round16(D > M ? D : M); }
  FWLAB_HD static int64_t stage_rows(int64_t W) { return W > kChunk ? W : kChunk; }
  FWLAB_HD static int64_t bytes(int64_t D, int64_t M) {
    const int64_t W = width(D, M);
    return (2 * kChunk * kChunk + 2 * kChunk * W) * int64_t(sizeof(Acc)) +
           2 * stage_rows(W) * W * int64_t(sizeof(Stage));
  }
  FWLAB_HD static Scratch carve(void* base, int64_t D, int64_t M) {
    Scratch s;
    s.W = width(D, M);
    Acc* acc = static_cast<Acc*>(base);
    s.P = acc, s.R = acc + kChunk * kChunk, s.out = s.R + kChunk * kChunk, s.tmp = s.out + kChunk * s.W;
    s.a = reinterpret_cast<Stage*>(s.tmp + kChunk * s.W), s.b = s.a + stage_rows(s.W) * s.W;
    return s;
  }
};

// C[m, n] (+)= op(A)[m, k] op(B)[k, n] over the block. op(A) = A stored row-major [m, k] (lda), or with a_trans
// A stored [k, m]; the same for B ([k, n], or [n, k] with b_trans). Tensor cores (WMMA 16x16x16, fp32 accumulate)
// on the GPU for bf16/fp16 stages with every size a multiple of 16; a plain loop otherwise.
template <bool ATrans, bool BTrans, typename Stage, typename Acc>
FWLAB_HD void block_gemm(const BlockCtx& ctx, int64_t m, int64_t n, int64_t k, const Stage* A, int64_t lda,
                         const Stage* B, int64_t ldb, Acc* Cm, int64_t ldc, bool accumulate) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800  // bf16 WMMA needs sm_80; older GPUs take the loop
  if constexpr ((std::is_same_v<Stage, __nv_bfloat16> || std::is_same_v<Stage, __half>)&&std::is_same_v<Acc, float>) {
    namespace w = nvcuda::wmma;
    using ALayout = std::conditional_t<ATrans, w::col_major, w::row_major>;
    using BLayout = std::conditional_t<BTrans, w::col_major, w::row_major>;
    const int warp = ctx.tid / 32, warps = ctx.threads / 32;
    const int64_t tiles_n = n / 16, tiles = (m / 16) * tiles_n;
    for (int64_t tile = warp; tile < tiles; tile += warps) {
      const int64_t tm = tile / tiles_n * 16, tn = tile % tiles_n * 16;
      w::fragment<w::accumulator, 16, 16, 16, float> acc;
      if (accumulate)
        w::load_matrix_sync(acc, Cm + tm * ldc + tn, unsigned(ldc), w::mem_row_major);
      else
        w::fill_fragment(acc, 0.0f);
      for (int64_t kk = 0; kk < k; kk += 16) {
        w::fragment<w::matrix_a, 16, 16, 16, Stage, ALayout> fa;
        w::fragment<w::matrix_b, 16, 16, 16, Stage, BLayout> fb;
        w::load_matrix_sync(fa, ATrans ? A + kk * lda + tm : A + tm * lda + kk, unsigned(lda));
        w::load_matrix_sync(fb, BTrans ? B + tn * ldb + kk : B + kk * ldb + tn, unsigned(ldb));
        w::mma_sync(acc, fa, fb, acc);
      }
      w::store_matrix_sync(Cm + tm * ldc + tn, acc, unsigned(ldc), w::mem_row_major);
    }
  } else
#endif
  {
    for (int64_t e = ctx.tid; e < m * n; e += ctx.threads) {
      const int64_t r = e / n, c = e % n;
      Acc sum = accumulate ? Cm[r * ldc + c] : Acc(0);
      for (int64_t x = 0; x < k; ++x)
        sum += convert<Acc>(ATrans ? A[x * lda + r] : A[r * lda + x]) *
               convert<Acc>(BTrans ? B[c * ldb + x] : B[x * ldb + c]);
      Cm[r * ldc + c] = sum;
    }
  }
}

// One chunk's view of a [steps, width] input and of the gate that goes with it, for the pair sums below.
template <typename In, typename Acc>
struct Side {
  const In* x;         // the chunk's first row
  int64_t width;       // columns of x
  const Acc* gate;     // the chunk's first gate row, or null (no gate)
  int64_t gate_width;  // width, or 1 (one gate per step)
  FWLAB_HD Acc value(int64_t t, int64_t j) const { return convert<Acc>(x[t * width + j]); }
  FWLAB_HD Acc g(int64_t t, int64_t j) const {
    return gate ? gate[t * gate_width + (gate_width == 1 ? 0 : j)] : Acc(0);
  }
};

// P[t, s] = sum_j x_tj z_sj e^{G_tj - G_sj} for s <= t, 0 above the diagonal (x and z share the gate G).
template <typename In, typename Acc, typename Stage>
FWLAB_HD void pair_scores(const BlockCtx& ctx, const Side<In, Acc>& x, const Side<In, Acc>& z, Acc* P,
                          const Scratch<Stage, Acc>& s) {
  const int64_t K = x.width, ld = round16(K);
  for (int64_t e = ctx.tid; e < kChunk * kChunk; e += ctx.threads) {  // within sub-chunks, exactly; zeros above
    const int64_t t = e / kChunk, u = e % kChunk;
    Acc sum = 0;
    if (u <= t && u / kSub == t / kSub)
      for (int64_t j = 0; j < K; ++j) sum += x.value(t, j) * z.value(u, j) * exp_acc(x.g(t, j) - x.g(u, j));
    if (u / kSub == t / kSub || u > t) P[e] = sum;
  }
  for (int64_t I = 1; I < kChunk / kSub; ++I) {  // sub-chunk I against all before it, split at r = kSub I - 1
    const int64_t r = kSub * I - 1, before = kSub * I;
    for (int64_t e = ctx.tid; e < kSub * ld; e += ctx.threads) {
      const int64_t t = before + e / ld, j = e % ld;
      s.a[e] = convert<Stage>(j < K ? x.value(t, j) * exp_acc(x.g(t, j) - x.g(r, j)) : Acc(0));
    }
    for (int64_t e = ctx.tid; e < before * ld; e += ctx.threads) {
      const int64_t u = e / ld, j = e % ld;
      s.b[e] = convert<Stage>(j < K ? z.value(u, j) * exp_acc(x.g(r, j) - x.g(u, j)) : Acc(0));
    }
    ctx.sync();
    block_gemm<false, true>(ctx, kSub, before, ld, s.a, ld, s.b, ld, P + before * kChunk, kChunk, false);
    ctx.sync();
  }
}

// out[t, i] = sum_{s<t} P[t, s] w_si e^{F_ti - F_si} (forward: later rows read earlier ones), or with reverse
// out[s, i] = sum_{t>s} P[t, s] w_ti e^{F_ti - F_si}: the diagonal left out. Written to out [kChunk, W] (first
// w.width columns).
template <bool Reverse, typename In, typename Acc, typename Stage>
FWLAB_HD void apply_pairs(const BlockCtx& ctx, const Acc* P, const Side<In, Acc>& w, const Scratch<Stage, Acc>& s) {
  const int64_t K = w.width, ld = round16(K), W = s.W;
  for (int64_t e = ctx.tid; e < kChunk * K; e += ctx.threads) {  // within sub-chunks, exactly
    const int64_t row = e / K, i = e % K, first = row / kSub * kSub;
    Acc sum = 0;
    for (int64_t other = first; other < first + kSub; ++other) {
      if (Reverse ? other <= row : other >= row) continue;
      const int64_t t = Reverse ? other : row, u = Reverse ? row : other;
      sum += P[t * kChunk + u] * w.value(other, i) * exp_acc(w.g(t, i) - w.g(u, i));
    }
    s.out[row * W + i] = sum;
  }
  ctx.sync();
  for (int64_t I = 0; I < kChunk / kSub; ++I) {
    // Forward: rows of sub-chunk I read all rows before it (r = kSub I - 1). Reverse: rows of sub-chunk I read
    // all rows after it (r = kSub I + kSub - 1). Either way r lies between the two sides.
    const int64_t first = kSub * I, others = Reverse ? kChunk - first - kSub : first;
    if (others == 0) continue;
    const int64_t other0 = Reverse ? first + kSub : 0, r = Reverse ? first + kSub - 1 : first - 1;
    for (int64_t e = ctx.tid; e < kSub * others; e += ctx.threads) {  // this sub-chunk's rows of P (or P^T)
      const int64_t row = first + e / others, other = other0 + e % others;
      s.a[e] = convert<Stage>(Reverse ? P[other * kChunk + row] : P[row * kChunk + other]);
    }
    for (int64_t e = ctx.tid; e < others * ld; e += ctx.threads) {
      const int64_t other = other0 + e / ld, i = e % ld;
      const Acc split = Reverse ? w.g(other, i) - w.g(r, i) : w.g(r, i) - w.g(other, i);
      s.b[e] = convert<Stage>(i < K ? w.value(other, i) * exp_acc(split) : Acc(0));
    }
    ctx.sync();
    block_gemm<false, false>(ctx, kSub, ld, others, s.a, others, s.b, ld, s.tmp, W, false);
    ctx.sync();
    for (int64_t e = ctx.tid; e < kSub * K; e += ctx.threads) {
      const int64_t row = first + e / K, i = e % K;
      const Acc split = Reverse ? w.g(r, i) - w.g(row, i) : w.g(row, i) - w.g(r, i);
      s.out[row * W + i] += exp_acc(split) * s.tmp[(e / K) * W + i];
    }
    ctx.sync();
  }
}

// The power of two by which a state-sized H [D, M] (Acc) is divided before it is staged: it brings max |H| into
// [2^13, 2^14). An fp16 stage holds at most 65,504, and a state without decay (the additive rule) grows without
// bound over T; powers of two scale exactly, so the other stages lose nothing, and every stage takes the same path
// so that the host runs (fp64, fp32 and emulated fp16 / bf16) check it. `slots` holds ctx.threads values of
// scratch that no thread reads or writes meanwhile. Returns the exponent e: staged = H * 2^-e.
template <typename Acc>
FWLAB_HD int state_stage_exponent(const BlockCtx& ctx, const Acc* H, int64_t D, int64_t M, Acc* slots) {
  Acc largest = 0;
  for (int64_t e = ctx.tid; e < D * M; e += ctx.threads) largest = fmax(largest, fabs(H[e]));
  slots[ctx.tid] = largest;
  ctx.sync();
  for (int t = 0; t < ctx.threads; ++t) largest = fmax(largest, slots[t]);
  ctx.sync();                                                           // the slots are scratch again
  const bool finite = largest > Acc(0) && largest - largest == Acc(0);  // false for 0, inf and NaN: nothing to gain
  return finite ? exponent_acc(largest) - 14 : 0;
}

// The term through a state-sized matrix H [D, M] (Acc): out[t, :] += gate_out(t) * (op(H) (gate_in(t) * x_t)),
// op(H) = H ([D, M], for x of width M) or H^T. Gates measured from the chunk start (ToEnd false: e^{G_t}) or to
// its end (ToEnd true: e^{G_end - G_t}); both <= 0.
template <bool ToEnd, bool Transposed, typename In, typename Acc, typename Stage>
FWLAB_HD void state_term(const BlockCtx& ctx, const Side<In, Acc>& x, const Acc* H, int64_t D, int64_t M,
                         const Side<In, Acc>& gate_out, const Scratch<Stage, Acc>& s) {
  // Transposed: x has width D and out width M (out = x H); else x has width M and out width D (out = x H^T).
  const int64_t K = x.width, out_w = Transposed ? M : D, ldk = round16(K), ldo = round16(out_w), W = s.W,
                end = kChunk - 1;
  auto gate = [&](const Side<In, Acc>& side, int64_t t, int64_t j) {
    return ToEnd ? side.g(end, j) - side.g(t, j) : side.g(t, j);
  };
  for (int64_t e = ctx.tid; e < kChunk * ldk; e += ctx.threads) {
    const int64_t t = e / ldk, j = e % ldk;
    s.a[e] = convert<Stage>(j < K ? x.value(t, j) * exp_acc(gate(x, t, j)) : Acc(0));
  }
  const int shift = state_stage_exponent(ctx, H, D, M, s.tmp);
  for (int64_t e = ctx.tid; e < ldo * ldk;
       e += ctx.threads) {  // stage H * 2^-shift as [out_w, K] (read transposed below)
    const int64_t o = e / ldk, j = e % ldk;
    const bool inside = o < out_w && j < K;
    s.b[e] = convert<Stage>(inside ? scaled_acc(Transposed ? H[j * M + o] : H[o * M + j], -shift) : Acc(0));
  }
  ctx.sync();
  block_gemm<false, true>(ctx, kChunk, ldo, ldk, s.a, ldk, s.b, ldk, s.tmp, W, false);
  ctx.sync();
  for (int64_t e = ctx.tid; e < kChunk * out_w; e += ctx.threads) {
    const int64_t t = e / out_w, o = e % out_w;
    s.out[t * W + o] += exp_acc(gate(gate_out, t, o)) * scaled_acc(s.tmp[t * W + o], shift);
  }
  ctx.sync();
}

template <typename Out, typename Acc, typename Stage>
FWLAB_HD void write_out(const BlockCtx& ctx, const Scratch<Stage, Acc>& s, int64_t width, Out* to) {
  for (int64_t e = ctx.tid; e < kChunk * width; e += ctx.threads)
    to[e] = convert<Out>(s.out[(e / width) * s.W + e % width]);
  ctx.sync();
}

template <typename In, typename Acc>
struct ChunkSides {  // the four inputs of chunk n of head h with their gates
  Side<In, Acc> q, k, v, dy;
  FWLAB_HD ChunkSides(const ChunkProblem<In, Acc>& p, int64_t h, int64_t n) {
    const int64_t row = p.at(h, n, 0);
    const Acc* A = p.A ? p.A + row * p.a_width : nullptr;
    const Acc* B = p.B ? p.B + row * p.M : nullptr;
    q = {p.q + row * p.M, p.M, B, p.M};
    k = {p.k + row * p.M, p.M, B, p.M};
    v = {p.v + row * p.D, p.D, A, p.a_width};
    dy = {p.dy ? p.dy + row * p.D : nullptr, p.D, A, p.a_width};
  }
};

// y of chunk n of head h without the diagonal pair (the binding adds it), in the accumulation type, given the
// chunk-start states.
template <typename In, typename Acc, typename Stage>
FWLAB_HD void chunk_outputs(const BlockCtx& ctx, const ChunkProblem<In, Acc>& p, int64_t h, int64_t n,
                            const Acc* states, Acc* y, const Scratch<Stage, Acc>& s) {
  const ChunkSides<In, Acc> c(p, h, n);
  pair_scores(ctx, c.q, c.k, s.P, s);
  ctx.sync();
  apply_pairs<false>(ctx, s.P, c.v, s);
  state_term<false, false>(ctx, c.q, states + p.state_at(h, n), p.D, p.M, c.v, s);
  write_out(ctx, s, p.D, y + p.at(h, n, 0) * p.D);
}

// dq, dk, dv of chunk n of head h (Acc) without the diagonal pair, given the chunk-start states and their gradients.
template <typename In, typename Acc, typename Stage>
FWLAB_HD void chunk_gradients(const BlockCtx& ctx, const ChunkProblem<In, Acc>& p, int64_t h, int64_t n,
                              const Acc* states, const Acc* dstates, Acc* dq, Acc* dk, Acc* dv,
                              const Scratch<Stage, Acc>& s) {
  const ChunkSides<In, Acc> c(p, h, n);
  const int64_t row = p.at(h, n, 0);
  pair_scores(ctx, c.q, c.k, s.P, s);
  pair_scores(ctx, c.dy, c.v, s.R, s);
  ctx.sync();
  apply_pairs<false>(ctx, s.R, c.k, s);
  state_term<false, true>(ctx, c.dy, states + p.state_at(h, n), p.D, p.M, c.k, s);
  write_out(ctx, s, p.M, dq + row * p.M);
  apply_pairs<true>(ctx, s.R, c.q, s);
  state_term<true, true>(ctx, c.v, dstates + p.state_at(h, n + 1), p.D, p.M, c.k, s);
  write_out(ctx, s, p.M, dk + row * p.M);
  apply_pairs<true>(ctx, s.P, c.dy, s);
  state_term<true, false>(ctx, c.k, dstates + p.state_at(h, n + 1), p.D, p.M, c.v, s);
  write_out(ctx, s, p.D, dv + row * p.D);
}

// Scratch of a scan over rows [row0, row0 + rows) of a head's state: the rows [rows, W] (Acc), two stages.
template <typename Stage, typename Acc>
struct ScanScratch {
  Acc* S;
  Stage *a, *b;
  int64_t W;
  FWLAB_HD static int64_t bytes(int64_t rows, int64_t M) {
    return round16(rows) * round16(M) * int64_t(sizeof(Acc)) +
           kChunk * (round16(rows) + round16(M)) * int64_t(sizeof(Stage));
  }
  FWLAB_HD static ScanScratch carve(void* base, int64_t rows, int64_t M) {
    ScanScratch s;
    s.W = round16(M);
    s.S = static_cast<Acc*>(base);
    s.a = reinterpret_cast<Stage*>(s.S + round16(rows) * s.W), s.b = s.a + kChunk * round16(rows);
    return s;
  }
};

// The chunk-start states (Reverse false) or their gradients (Reverse true) of rows [row0, row0 + rows) of head h,
// into out [heads, chunks + 1, D, M]. Forward: S_{n+1} = e^{A_end} * S_n * e^{B_end} + sum_s (e^{A_end - A_s}
// v_s)(e^{B_end - B_s} k_s)^T from state0. Reverse: dH_n = e^{A_end} * dH_{n+1} * e^{B_end} + sum_t (e^{A_t}
// dy_t)(e^{B_t} q_t)^T from dstate_final.
template <bool Reverse, typename In, typename Acc, typename Stage>
FWLAB_HD void scan_states(const BlockCtx& ctx, const ChunkProblem<In, Acc>& p, int64_t h, int64_t row0, int64_t rows,
                          Acc* out, const ScanScratch<Stage, Acc>& s) {
  const int64_t M = p.M, W = s.W, ldr = round16(rows), N = p.chunks(), end = kChunk - 1;
  const Acc* start = Reverse ? p.dstate_final : p.state0;
  for (int64_t e = ctx.tid; e < ldr * W; e += ctx.threads) {
    const int64_t i = e / W, j = e % W;
    s.S[e] = (start && i < rows && j < M) ? start[(h * p.D + row0 + i) * M + j] : Acc(0);
  }
  ctx.sync();
  for (int64_t step = 0; step <= N; ++step) {
    const int64_t n = Reverse ? N - step : step;  // the chunk whose start (end, reversed) S now holds
    Acc* keep = out + p.state_at(h, n) + row0 * M;
    for (int64_t e = ctx.tid; e < rows * M; e += ctx.threads) keep[e] = s.S[(e / M) * W + e % M];
    if (step == N) break;
    const int64_t c = Reverse ? n - 1 : n;  // the chunk the scan crosses next
    const ChunkSides<In, Acc> side(p, h, c);
    const auto& x = Reverse ? side.dy : side.v;  // rows side
    const auto& z = Reverse ? side.q : side.k;   // key side
    for (int64_t e = ctx.tid; e < kChunk * ldr; e += ctx.threads) {
      const int64_t t = e / ldr, i = e % ldr;
      const Acc g = Reverse ? x.g(t, row0 + i) : x.g(end, row0 + i) - x.g(t, row0 + i);
      s.a[e] = convert<Stage>(i < rows ? x.value(t, row0 + i) * exp_acc(g) : Acc(0));
    }
    for (int64_t e = ctx.tid; e < kChunk * W; e += ctx.threads) {
      const int64_t t = e / W, j = e % W;
      const Acc g = Reverse ? z.g(t, j) : z.g(end, j) - z.g(t, j);
      s.b[e] = convert<Stage>(j < M ? z.value(t, j) * exp_acc(g) : Acc(0));
    }
    for (int64_t e = ctx.tid; e < rows * M; e += ctx.threads) {
      const int64_t i = e / M, j = e % M;
      s.S[i * W + j] *= exp_acc(x.g(end, row0 + i) + z.g(end, j));
    }
    ctx.sync();
    block_gemm<true, false>(ctx, ldr, W, kChunk, s.a, ldr, s.b, W, s.S, W, true);
    ctx.sync();
  }
  ctx.sync();
}

}  // namespace fwlab::cuda

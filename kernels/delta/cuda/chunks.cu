// CUDA launch of the delta family's chunked kernel (kernels/delta/cuda/chunks.h): prepare and the chunk programs run
// one block per (chunk, head), all chunks at once; the state scans one block per (head, 16 state rows), sequential
// over chunks.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "kernels/cuda/launch.cuh"
#include "kernels/delta/cuda/chunk_gradients_mma.h"
#include "kernels/delta/cuda/chunks.h"
#include "kernels/delta/cuda/chunks_api.h"

namespace fwlab::cuda {

namespace {

using delta::Gradients;
using delta::GradScratch;
using delta::Problem;

constexpr int kScanThreads = 128, kChunkThreads = 256;

__device__ BlockCtx block() { return BlockCtx{int(threadIdx.x), int(blockDim.x)}; }

// bf16 and fp16 take the tensor-core programs (kernels/delta/cuda/chunks_mma.h, chunk_gradients_mma.h) where the
// instruction exists (sm_80 on); code built for an older GPU runs the plain programs in the same launches. The
// plain programs' scratch covers the tensor-core ones' (PairsMma: In [64, 72] within Acc [64, 64]; GradScratchMma
// within GradScratch).
template <typename In, typename Acc>
constexpr bool kTensorCores = std::is_same_v<Acc, float> &&
                              (std::is_same_v<In, __nv_bfloat16> || std::is_same_v<In, __half>);
static_assert(delta::PairsMma<__nv_bfloat16>::bytes() <= kChunk * kChunk * int64_t(sizeof(float)));

template <typename In, typename Acc>
__global__ void prepare_kernel(Problem<In, Acc> p) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int64_t h = blockIdx.y, n = blockIdx.x;
#if __CUDA_ARCH__ >= 800
  if constexpr (kTensorCores<In, Acc>) return delta::prepare_chunk_mma(block(), p, h, n, reinterpret_cast<Acc*>(smem));
#endif
  delta::prepare_chunk(block(), p, h, n, reinterpret_cast<Acc*>(smem));
}

template <typename In, typename Acc>
__global__ void scan_kernel(Problem<In, Acc> p, bool reverse, Acc* out) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int64_t h = blockIdx.x, row0 = int64_t(blockIdx.y) * kScanRows;
  const int64_t rows = p.D - row0 < kScanRows ? p.D - row0 : kScanRows;
  auto* S = reinterpret_cast<Acc*>(smem);
  if (reverse)
    delta::scan_reverse(block(), p, h, row0, rows, out, S);
  else
    delta::scan_forward(block(), p, h, row0, rows, out, S);
}

template <typename In, typename Acc>
__global__ void outputs_kernel(Problem<In, Acc> p, const Acc* states, Acc* y) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int64_t h = blockIdx.y, n = blockIdx.x;
#if __CUDA_ARCH__ >= 800
  if constexpr (kTensorCores<In, Acc>)
    return delta::chunk_outputs_mma(block(), p, h, n, states, y, reinterpret_cast<In*>(smem));
#endif
  delta::chunk_outputs(block(), p, h, n, states, y, reinterpret_cast<Acc*>(smem));
}

template <typename In, typename Acc>
__global__ void du_pairs_kernel(Problem<In, Acc> p) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int64_t h = blockIdx.y, n = blockIdx.x;
#if __CUDA_ARCH__ >= 800
  if constexpr (kTensorCores<In, Acc>) return delta::chunk_du_pairs_mma(block(), p, h, n, reinterpret_cast<In*>(smem));
#endif
  delta::chunk_du_pairs(block(), p, h, n, reinterpret_cast<Acc*>(smem));
}

template <typename In, typename Acc>
__global__ void gradients_kernel(Problem<In, Acc> p, const Acc* states, const Acc* dstates, Gradients<Acc> out) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int64_t h = blockIdx.y, n = blockIdx.x;
#if __CUDA_ARCH__ >= 800
  if constexpr (kTensorCores<In, Acc>) {
    const auto s = delta::GradScratchMma<Acc>::carve(smem, p.D, p.M);
    return delta::chunk_gradients_mma(block(), p, h, n, states, dstates, out, s);
  }
#endif
  delta::chunk_gradients(block(), p, h, n, states, dstates, out, GradScratch<Acc>::carve(smem, p.D, p.M));
}

template <typename In, typename Acc>
Problem<In, Acc> problem(const DeltaChunkArgs& a) {
  Problem<In, Acc> p;
  p.q = static_cast<const In*>(a.q), p.k = static_cast<const In*>(a.k), p.v = static_cast<const In*>(a.v);
  p.dy = static_cast<const In*>(a.dy), p.beta = static_cast<const Acc*>(a.beta);
  p.log_alpha = static_cast<const Acc*>(a.log_alpha), p.state0 = static_cast<const Acc*>(a.state0);
  p.dstate_final = static_cast<const Acc*>(a.dstate_final);
  p.g = static_cast<Acc*>(a.g), p.W = static_cast<Acc*>(a.W), p.U = static_cast<Acc*>(a.U);
  p.u = static_cast<Acc*>(a.u), p.du = static_cast<Acc*>(a.du);
  p.heads = a.heads, p.steps = a.steps, p.D = a.D, p.M = a.M;
  return p;
}

bool well_formed(const DeltaChunkArgs& a) {
  return a.steps % kChunk == 0 && a.D > 0 && a.M > 0 && a.heads >= 0 && a.beta && a.g && a.W && a.U && a.u;
}

template <typename In, typename Acc>
dim3 chunk_grid(const Problem<In, Acc>& p) {
  return dim3(unsigned(p.chunks()), unsigned(p.heads));
}

template <typename In, typename Acc>
cudaError_t prepare_and_scan(const Problem<In, Acc>& p, Acc* states, cudaStream_t stream) {
  const int64_t pairs = kChunk * kChunk * int64_t(sizeof(Acc));
  cudaError_t e = launch(prepare_kernel<In, Acc>, chunk_grid(p), kChunkThreads, pairs, stream, p);
  const dim3 scans(unsigned(p.heads), unsigned((p.D + kScanRows - 1) / kScanRows));
  if (e == cudaSuccess)
    e = launch(scan_kernel<In, Acc>, scans, kScanThreads, delta::scan_scratch_bytes<Acc>(p.M), stream, p, false,
               states);
  return e;
}

template <typename In, typename Acc>
cudaError_t forward(const DeltaChunkArgs& a, void* y, void* states, cudaStream_t stream) {
  const auto p = problem<In, Acc>(a);
  cudaError_t e = prepare_and_scan(p, static_cast<Acc*>(states), stream);
  if (e != cudaSuccess) return e;
  return launch(outputs_kernel<In, Acc>, chunk_grid(p), kChunkThreads, kChunk * kChunk * int64_t(sizeof(Acc)), stream,
                p, static_cast<const Acc*>(states), static_cast<Acc*>(y));
}

template <typename In, typename Acc>
cudaError_t backward(const DeltaChunkArgs& a, void* states, void* dstates, const Gradients<Acc>& out,
                     cudaStream_t stream) {
  const auto p = problem<In, Acc>(a);
  cudaError_t e = prepare_and_scan(p, static_cast<Acc*>(states), stream);
  const int64_t pairs = kChunk * kChunk * int64_t(sizeof(Acc));
  if (e == cudaSuccess) e = launch(du_pairs_kernel<In, Acc>, chunk_grid(p), kChunkThreads, pairs, stream, p);
  const dim3 scans(unsigned(p.heads), unsigned((p.D + kScanRows - 1) / kScanRows));
  if (e == cudaSuccess)
    e = launch(scan_kernel<In, Acc>, scans, kScanThreads, delta::scan_scratch_bytes<Acc>(p.M), stream, p, true,
               static_cast<Acc*>(dstates));
  if (e != cudaSuccess) return e;
  return launch(gradients_kernel<In, Acc>, chunk_grid(p), kChunkThreads, GradScratch<Acc>::bytes(p.D, p.M), stream, p,
                static_cast<const Acc*>(states), static_cast<const Acc*>(dstates), out);
}

}  // namespace

cudaError_t delta_chunks_forward(const DeltaChunkArgs& a, void* y, void* states, cudaStream_t stream) {
  if (!well_formed(a)) return cudaErrorInvalidValue;
  return with_chunk_types(
      a.dtype, [&](auto in, auto acc) { return forward<decltype(in), decltype(acc)>(a, y, states, stream); });
}

cudaError_t delta_chunks_backward(const DeltaChunkArgs& a, void* states, void* dstates, void* dq, void* dk, void* dv,
                                  void* dbeta, void* dlog_alpha, cudaStream_t stream) {
  if (!well_formed(a) || a.dy == nullptr || a.du == nullptr) return cudaErrorInvalidValue;
  return with_chunk_types(a.dtype, [&](auto in, auto acc) {
    using Acc = decltype(acc);
    const Gradients<Acc> out{static_cast<Acc*>(dq), static_cast<Acc*>(dk), static_cast<Acc*>(dv),
                             static_cast<Acc*>(dbeta), static_cast<Acc*>(dlog_alpha)};
    return backward<decltype(in), Acc>(a, states, dstates, out, stream);
  });
}

int64_t delta_chunks_shared_bytes(const DeltaChunkArgs& a) {
  return a.dtype == ChunkDtype::f64 ? GradScratch<double>::bytes(a.D, a.M) : GradScratch<float>::bytes(a.D, a.M);
}

}  // namespace fwlab::cuda

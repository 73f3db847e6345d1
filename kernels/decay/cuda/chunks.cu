// CUDA launch of the chunked decay kernel (kernels/decay/cuda/chunks.h): the state scans run one block per (head, 16
// state rows), sequential over chunks; the chunk programs run one block per (chunk, head), all chunks at once.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/launch.cuh"
#include "kernels/decay/cuda/chunks.h"
#include "kernels/decay/cuda/chunks_api.h"

namespace fwlab::cuda {

namespace {

constexpr int kScanThreads = 128, kChunkThreads = 256;

template <typename In, typename Acc>
__global__ void scan_kernel(ChunkProblem<In, Acc> p, bool reverse, Acc* out) {
  extern __shared__ __align__(128) unsigned char smem[];
  const auto s = ScanScratch<In, Acc>::carve(smem, kScanRows, p.M);
  const BlockCtx ctx{int(threadIdx.x), int(blockDim.x)};
  const int64_t h = blockIdx.x, row0 = int64_t(blockIdx.y) * kScanRows;
  if (reverse)
    scan_states<true>(ctx, p, h, row0, kScanRows, out, s);
  else
    scan_states<false>(ctx, p, h, row0, kScanRows, out, s);
}

template <typename In, typename Acc>
__global__ void outputs_kernel(ChunkProblem<In, Acc> p, const Acc* states, Acc* y) {
  extern __shared__ __align__(128) unsigned char smem[];
  const auto s = Scratch<In, Acc>::carve(smem, p.D, p.M);
  chunk_outputs(BlockCtx{int(threadIdx.x), int(blockDim.x)}, p, int64_t(blockIdx.y), int64_t(blockIdx.x), states, y, s);
}

template <typename In, typename Acc>
__global__ void gradients_kernel(ChunkProblem<In, Acc> p, const Acc* states, const Acc* dstates, Acc* dq, Acc* dk,
                                 Acc* dv) {
  extern __shared__ __align__(128) unsigned char smem[];
  const auto s = Scratch<In, Acc>::carve(smem, p.D, p.M);
  chunk_gradients(BlockCtx{int(threadIdx.x), int(blockDim.x)}, p, int64_t(blockIdx.y), int64_t(blockIdx.x), states,
                  dstates, dq, dk, dv, s);
}

template <typename In, typename Acc>
ChunkProblem<In, Acc> problem(const ChunkArgs& a) {
  ChunkProblem<In, Acc> p;
  p.q = static_cast<const In*>(a.q), p.k = static_cast<const In*>(a.k), p.v = static_cast<const In*>(a.v);
  p.dy = static_cast<const In*>(a.dy), p.A = static_cast<const Acc*>(a.A), p.B = static_cast<const Acc*>(a.B);
  p.state0 = static_cast<const Acc*>(a.state0), p.dstate_final = static_cast<const Acc*>(a.dstate_final);
  p.heads = a.heads, p.steps = a.steps, p.D = a.D, p.M = a.M, p.a_width = a.a_width;
  return p;
}

bool well_formed(const ChunkArgs& a) {
  return a.steps % kChunk == 0 && a.D % 16 == 0 && a.M % 16 == 0 && a.D > 0 && a.M > 0 && a.heads >= 0 &&
         (a.A == nullptr || a.a_width == 1 || a.a_width == a.D);
}

template <typename In, typename Acc>
cudaError_t scan(const ChunkProblem<In, Acc>& p, bool reverse, Acc* out, cudaStream_t stream) {
  const dim3 grid(unsigned(p.heads), unsigned(p.D / kScanRows));
  return launch(scan_kernel<In, Acc>, grid, kScanThreads, ScanScratch<In, Acc>::bytes(kScanRows, p.M), stream, p,
                reverse, out);
}

template <typename In, typename Acc>
cudaError_t forward(const ChunkArgs& a, void* y, void* states, cudaStream_t stream) {
  const auto p = problem<In, Acc>(a);
  cudaError_t e = scan(p, false, static_cast<Acc*>(states), stream);
  if (e != cudaSuccess) return e;
  const dim3 grid(unsigned(p.chunks()), unsigned(p.heads));
  return launch(outputs_kernel<In, Acc>, grid, kChunkThreads, Scratch<In, Acc>::bytes(p.D, p.M), stream, p,
                static_cast<const Acc*>(states), static_cast<Acc*>(y));
}

template <typename In, typename Acc>
cudaError_t backward(const ChunkArgs& a, void* states, void* dstates, void* dq, void* dk, void* dv,
                     cudaStream_t stream) {
  const auto p = problem<In, Acc>(a);
  cudaError_t e = scan(p, false, static_cast<Acc*>(states), stream);
  if (e == cudaSuccess) e = scan(p, true, static_cast<Acc*>(dstates), stream);
  if (e != cudaSuccess) return e;
  const dim3 grid(unsigned(p.chunks()), unsigned(p.heads));
  return launch(gradients_kernel<In, Acc>, grid, kChunkThreads, Scratch<In, Acc>::bytes(p.D, p.M), stream, p,
                static_cast<const Acc*>(states), static_cast<const Acc*>(dstates), static_cast<Acc*>(dq),
                static_cast<Acc*>(dk), static_cast<Acc*>(dv));
}

}  // namespace

cudaError_t decay_chunks_forward(const ChunkArgs& a, void* y, void* states, cudaStream_t stream) {
  if (!well_formed(a)) return cudaErrorInvalidValue;
  return with_chunk_types(
      a.dtype, [&](auto in, auto acc) { return forward<decltype(in), decltype(acc)>(a, y, states, stream); });
}

cudaError_t decay_chunks_backward(const ChunkArgs& a, void* states, void* dstates, void* dq, void* dk, void* dv,
                                  cudaStream_t stream) {
  if (!well_formed(a) || a.dy == nullptr) return cudaErrorInvalidValue;
  return with_chunk_types(a.dtype, [&](auto in, auto acc) {
    return backward<decltype(in), decltype(acc)>(a, states, dstates, dq, dk, dv, stream);
  });
}

int64_t decay_chunks_shared_bytes(const ChunkArgs& a) {
  switch (a.dtype) {
    case ChunkDtype::f64:
      return Scratch<double, double>::bytes(a.D, a.M);
    case ChunkDtype::f32:
      return Scratch<float, float>::bytes(a.D, a.M);
    default:
      return Scratch<__half, float>::bytes(a.D, a.M);
  }
}

}  // namespace fwlab::cuda

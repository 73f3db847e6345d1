// What the chunked kernels' launch files share (kernels/decay/cuda/chunks.cu, kernels/delta/cuda/chunks.cu): a launch
// with dynamic shared memory (the kernel's limit raised first: over 48 KiB needs it; an empty grid launches nothing;
// the launch's own error returned), and the element types of a ChunkDtype.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/decay/cuda/chunks_api.h"  // ChunkDtype

namespace fwlab::cuda {

template <typename Kernel, typename... Args>
cudaError_t launch(Kernel kernel, dim3 grid, int threads, int64_t bytes, cudaStream_t stream, Args... args) {
  if (grid.x == 0 || grid.y == 0) return cudaSuccess;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (e != cudaSuccess) return e;
  kernel<<<grid, threads, size_t(bytes), stream>>>(args...);
  return cudaGetLastError();
}

// Calls f(In{}, Acc{}) with the kernel's types for a dtype tag: fp64 in fp64, the others accumulated in fp32.
template <typename F>
cudaError_t with_chunk_types(ChunkDtype dtype, F&& f) {
  switch (dtype) {
    case ChunkDtype::f64:
      return f(double{}, double{});
    case ChunkDtype::f32:
      return f(float{}, float{});
    case ChunkDtype::bf16:
      return f(__nv_bfloat16{}, float{});
    case ChunkDtype::f16:
      return f(__half{}, float{});
  }
  return cudaErrorInvalidValue;
}

}  // namespace fwlab::cuda

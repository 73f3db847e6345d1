// What the chunked kernels' launch files share (kernels/decay/cuda/chunks.cu, kernels/delta/cuda/chunks.cu): a launch
// with dynamic shared memory (the kernel's limit raised first: over 48 KiB needs it; an empty grid launches nothing;
// the launch's own error returned), and the element types of a ChunkDtype.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

#include "kernels/decay/cuda/chunks_api.h"  // ChunkDtype

namespace fwlab::cuda {

// A kernel's dynamic shared memory limit is one setting per function and device: lowering it for a small launch
// while another host thread launches the same kernel large would fail that launch. So the limit is only ever raised,
// under a lock, and remembered per (kernel, device).
inline cudaError_t allow_shared_memory(const void* kernel, int64_t bytes) {
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, int64_t> allowed;
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  const std::lock_guard<std::mutex> lock(mutex);
  int64_t& now = allowed[{kernel, device}];
  if (e != cudaSuccess || bytes <= now) return e;
  e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (e == cudaSuccess) now = bytes;
  return e;
}

template <typename Kernel, typename... Args>
cudaError_t launch(Kernel kernel, dim3 grid, int threads, int64_t bytes, cudaStream_t stream, Args... args) {
  if (grid.x == 0 || grid.y == 0) return cudaSuccess;
  const cudaError_t e = allow_shared_memory(reinterpret_cast<const void*>(kernel), bytes);
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

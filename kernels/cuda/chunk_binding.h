// What the chunked kernels' libtorch bindings share (kernels/decay/chunk_cuda.cpp, kernels/delta/chunk_cuda.cpp):
// the accumulation type, the host runner's element types, and on CUDA builds the kernel's dtype tag, the device's
// opt-in shared memory and the launch error check.
#pragma once

#include <torch/torch.h>

#include "kernels/cuda/host_half.h"

#if defined(FWLAB_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include "kernels/decay/cuda/chunks_api.h"  // ChunkDtype
#endif

namespace fwlab::kernels::chunk_binding {

// States, gates and gradients: fp64 for fp64 inputs, fp32 otherwise.
inline torch::ScalarType acc_type(torch::ScalarType in) {
  return in == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
}

inline const void* void_or_null(const torch::Tensor& x) { return x.defined() ? x.data_ptr() : nullptr; }

// Calls f(In{}, Acc{}) with the host runner's element types for a dtype: fp64 and fp32 as themselves; bf16 and fp16
// in emulated 16-bit stages with fp32 accumulation (kernels/cuda/host_half.h), rounded where the GPU rounds, so
// that the host run shows what the GPU's bf16 / fp16 paths compute. `name`: the caller, for the error.
template <typename F>
void dispatch_host(torch::ScalarType t, const char* name, F&& f) {
  switch (t) {
    case torch::kFloat64:
      return f(double{}, double{});
    case torch::kFloat32:
      return f(float{}, float{});
    case torch::kBFloat16:
      return f(cuda::HostBf16{}, float{});
#if defined(FWLAB_HOST_FP16)
    case torch::kFloat16:
      return f(cuda::HostFp16{}, float{});
#endif
    default:
      TORCH_CHECK(false, name,
                  ": float64, float32, bfloat16 or float16 (where the compiler has _Float16) tensors expected, got ",
                  t);
  }
}

#if defined(FWLAB_HAVE_CUDA)

inline cuda::ChunkDtype chunk_dtype(torch::ScalarType t, const char* name) {
  switch (t) {
    case torch::kFloat64:
      return cuda::ChunkDtype::f64;
    case torch::kFloat32:
      return cuda::ChunkDtype::f32;
    case torch::kBFloat16:
      return cuda::ChunkDtype::bf16;
    case torch::kFloat16:
      return cuda::ChunkDtype::f16;
    default:
      TORCH_CHECK(false, name, ": float64, float32, bfloat16 or float16 tensors expected, got ", t);
  }
}

// The opt-in shared memory per block of the current device.
inline int shared_memory_limit() {
  int limit = 0, device = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  return limit;
}

inline void check(cudaError_t e, const char* what) { TORCH_CHECK(e == cudaSuccess, what, ": ", cudaGetErrorString(e)); }

#endif

}  // namespace fwlab::kernels::chunk_binding

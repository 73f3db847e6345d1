// Where a kernel launch goes: the tensors' device (CudaDeviceGuard) and libtorch's current stream of the tensors'
// device, so that fwlab's kernels order correctly with the surrounding libtorch ops and with a caller's own stream
// (torch.cuda.stream, CUDA graphs). A CPU libtorch (Debian's) has no libc10_cuda and no CUDA tensors: there the legacy
// default stream is the only one, and nothing can reach a launch anyway. CMake defines FWLAB_TORCH_CUDA where libtorch
// has CUDA.
#pragma once

#include <cuda_runtime_api.h>

#if defined(FWLAB_TORCH_CUDA)
#include <c10/cuda/CUDAStream.h>
#endif

namespace fwlab::kernels {

inline cudaStream_t current_cuda_stream(int device) {
#if defined(FWLAB_TORCH_CUDA)
  return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
#else
  (void)device;
  return nullptr;
#endif
}

// Kernels launch on the tensors' GPU; the caller's current device is restored after.
struct CudaDeviceGuard {
  int previous = 0;
  explicit CudaDeviceGuard(int device) {
    cudaGetDevice(&previous);
    cudaSetDevice(device);
  }
  ~CudaDeviceGuard() { cudaSetDevice(previous); }
};

}  // namespace fwlab::kernels

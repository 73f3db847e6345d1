// Which of the compiled architectures a GPU actually runs: the __CUDA_ARCH__ of the code the driver picked for it
// (its own sm_XX, else a lower one, else PTX compiled on the fly). fwlab doctor prints it, since a build without
// sm_80 or newer runs the chunked kernel's scalar loops instead of its tensor-core products.
#include "kernels/cuda/arch_probe.h"

namespace fwlab::cuda {

namespace {

__global__ void arch_kernel(int* out) {
#if defined(__CUDA_ARCH__)
  *out = __CUDA_ARCH__;
#endif
}

}  // namespace

cudaError_t running_arch(int device, int* arch) {
  int previous = 0;
  cudaError_t e = cudaGetDevice(&previous);
  if (e == cudaSuccess) e = cudaSetDevice(device);
  int* slot = nullptr;
  if (e == cudaSuccess) e = cudaMalloc(reinterpret_cast<void**>(&slot), sizeof(int));
  if (e == cudaSuccess) {
    arch_kernel<<<1, 1>>>(slot);
    e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaMemcpy(arch, slot, sizeof(int), cudaMemcpyDeviceToHost);
    cudaFree(slot);
  }
  cudaSetDevice(previous);
  return e;
}

}  // namespace fwlab::cuda

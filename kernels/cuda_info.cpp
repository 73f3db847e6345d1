#include "kernels/cuda_info.h"

#if defined(FWLAB_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include "kernels/cuda/arch_probe.h"
#endif

namespace fwlab::kernels {

std::string cuda_version_text(int version) {
  if (version <= 0) return "unknown";
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

#if defined(FWLAB_HAVE_CUDA)

CudaReport cuda_report() {
  CudaReport r;
  r.kernels_built = true;
#if defined(FWLAB_CUDA_ARCHS)
  r.architectures = FWLAB_CUDA_ARCHS;
#endif
#if defined(FWLAB_NVCC_VERSION)
  r.nvcc = FWLAB_NVCC_VERSION;
#endif
  cudaRuntimeGetVersion(&r.runtime);
  cudaDriverGetVersion(&r.driver);
  if (const cudaError_t e = cudaGetDeviceCount(&r.devices); e != cudaSuccess) {
    r.devices = 0, r.error = cudaGetErrorString(e);
    return r;
  }
  if (r.devices == 0) return r;
  cudaDeviceProp prop{};
  if (const cudaError_t e = cudaGetDeviceProperties(&prop, 0); e != cudaSuccess) {
    r.error = cudaGetErrorString(e);
    return r;
  }
  r.device_name = prop.name, r.capability = prop.major * 10 + prop.minor;
  cudaDeviceGetAttribute(&r.shared_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
  if (const cudaError_t e = cuda::running_arch(0, &r.running_arch); e != cudaSuccess) r.error = cudaGetErrorString(e);
  return r;
}

#else

CudaReport cuda_report() { return {}; }

#endif

}  // namespace fwlab::kernels

// What `fwlab doctor` says about CUDA before it checks the kernels: whether fwlab's CUDA kernels were built and for
// which architectures, and the runtime, driver and device it finds. Compiles against any libtorch (no CUDA types).
#pragma once

#include <string>

namespace fwlab::kernels {

struct CudaReport {
  bool kernels_built = false;   // nvcc was found when configuring
  std::string architectures;    // as compiled: "80,90"
  std::string nvcc;             // the nvcc version that compiled them
  int runtime = 0, driver = 0;  // CUDA versions as 1000 major + 10 minor (12040: 12.4); 0: unknown
  int devices = 0;
  std::string device_name;  // of device 0
  int capability = 0;       // of device 0: 90 for sm_90
  int running_arch = 0;     // __CUDA_ARCH__ of the kernel code device 0 runs (800, 900, ...)
  int shared_optin = 0;     // device 0's opt-in shared memory per block, bytes
  std::string error;        // the first CUDA error met, if any
};

CudaReport cuda_report();

// 12040 -> "12.4"; 0 -> "unknown".
std::string cuda_version_text(int version);

}  // namespace fwlab::kernels

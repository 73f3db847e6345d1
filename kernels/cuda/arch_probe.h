// The __CUDA_ARCH__ (e.g. 900) of the fwlab kernel code that device `device` runs. Plain C++ API, no libtorch.
#pragma once

#include <cuda_runtime_api.h>

namespace fwlab::cuda {

cudaError_t running_arch(int device, int* arch);

}  // namespace fwlab::cuda

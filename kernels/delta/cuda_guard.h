// The first-use self-check of the delta family's chunked CUDA kernel (kernels/delta/cuda/chunks.h), as the decay
// kernels have theirs (kernels/decay/kernel_guard.h, whose verdicts, listener and test hook it shares): the first
// time a process would run it for a shape class (device, dtype, D, M, gated or not) it runs once on drawn inputs of
// that class against the libtorch WY form on the same device, outputs, final state and every gradient; a class that
// disagrees beyond its dtype's tolerance (or whose launch fails) runs the libtorch form for the rest of the process.
#pragma once

#include <torch/torch.h>

#include "kernels/common/recurrence.h"

namespace fwlab::kernels {

constexpr const char* kDeltaChunksKernel = "delta_chunks_cuda";

// Whether the kernel may run these inputs (CUDA, fits the GPU's shared memory, passed its class's check).
bool delta_cuda_kernel_trusted(const torch::Tensor& q, const torch::Tensor& v, const torch::Tensor& alpha);
// The kernel as it runs (with the test hook's 10% error where set_wrong_kernel names it).
RecurrenceResult delta_cuda_kernel(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   const torch::Tensor& alpha, const torch::Tensor& beta, const torch::Tensor& state0);

}  // namespace fwlab::kernels

// The first-use self-check of the delta family's chunked CUDA kernel (kernels/delta/cuda/chunks.h), as the decay
// kernels have theirs (kernels/decay/kernel_guard.h, whose verdicts, listener and test hook it shares): the first
// time a process would run it for a shape class (device, dtype, D, M, gated or not) it runs once on drawn inputs of
// that class against the libtorch WY form on the same device, outputs, final state and every gradient; a class that
// disagrees beyond its dtype's tolerance (or whose launch fails) runs the libtorch form for the rest of the process.
#pragma once

#include <torch/torch.h>

#include <functional>

#include "kernels/common/recurrence.h"
#include "kernels/decay/kernel_check.h"  // KernelComparison

namespace fwlab::kernels {

constexpr const char* kDeltaChunksKernel = "delta_chunks_cuda";

// Whether the kernel may run these inputs (CUDA, fits the GPU's shared memory, passed its class's check).
bool delta_cuda_kernel_trusted(const torch::Tensor& q, const torch::Tensor& v, const torch::Tensor& alpha);
// The kernel as it runs (with the test hook's 10% error where set_wrong_kernel names it).
RecurrenceResult delta_cuda_kernel(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   const torch::Tensor& alpha, const torch::Tensor& beta, const torch::Tensor& state0);

// A test hook: CPU calls of delta_family_recurrence run the CUDA kernel's block programs on the host instead, so
// that a model's own tensors (shapes, dtypes, gates) go through the kernel's binding where no GPU is.
void route_delta_to_host_kernel(bool on);
bool delta_routed_to_host_kernel();

// A delta-family kernel (alpha undefined: the delta rule) against the libtorch WY form on the same device: y, the
// final state and every gradient (alpha's as log alpha's), on drawn inputs of the case (unit keys and queries, gates
// in their ranges, a state) from a private generator, outside autocast. Used by the first-use check and by
// `fwlab doctor`; a kernel that throws counts as failed (infinite error).
using DeltaKernel =
    std::function<RecurrenceResult(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   const torch::Tensor& alpha, const torch::Tensor& beta, const torch::Tensor& state0)>;
struct DeltaCase {
  int64_t B = 1, H = 2, T = 80, D = 64, M = 64;  // T = 80: a chunk edge and padding
  torch::ScalarType dtype = torch::kFloat32;
  torch::Device device = torch::kCPU;
  bool gated = true;
};
KernelComparison compare_delta_with_libtorch(const DeltaKernel& kernel, const DeltaCase& c);

}  // namespace fwlab::kernels

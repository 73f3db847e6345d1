// The first-use self-check of fwlab's custom decay kernels. The first time a process would run a custom kernel
// (the chunked CUDA kernel; on the CPU the fused or the chunked kernel, as measured: form_race.h) for a shape
// class — device, dtype, D, M and gate layout — it runs it once on a small input of that class against libtorch's
// chunked form (kernel_check.h). On disagreement beyond the dtype's tolerance that class runs the libtorch form for
// the rest of the process, and the listener hears of it (the worker records a `kernel_fallback` event, which
// `fwlab report` lists): a kernel that is wrong on a user's GPU costs speed, never a silently wrong table.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <string>

#include "kernels/decay/kernel_check.h"

namespace fwlab::kernels {

enum class CustomKernel { cpu_fused, cuda_chunked };
const char* kernel_name(CustomKernel kernel);  // decay_fused_cpu | decay_chunks_cuda

struct KernelFallback {
  std::string kernel, shape_class;  // e.g. decay_chunks_cuda, "cuda:0 BFloat16 D=64 M=64 gates=row+key"
  KernelComparison comparison;      // what the check measured
};

// On by default; the worker sets it from job.json's kernel_check, benchmarks turn it off.
void set_kernel_self_check(bool enabled);
// Called (once per failing class, from the thread that ran the check) when a class falls back.
void on_kernel_fallback(std::function<void(const KernelFallback&)> listener);
// A test hook (job.json debug.wrong_kernel): the named kernel's outputs come out 10% wrong, as a broken kernel's
// would, so that the self-check and the fallback can be tested where no GPU is. "" (default): none.
void set_wrong_kernel(const std::string& name);
// Forgets every verdict (tests).
void reset_kernel_verdicts();

// The same verdicts for a kernel with a check of its own (the CUDA step kernel, kernels/common/recurrent_step.h):
// the class's stored verdict, else `check()`'s, stored and, when false, reported to the listener. True without
// checking where checks are off. While `input`'s stream captures a CUDA graph no check can run (its
// synchronisations would break the capture): a class without a verdict yet gets false, not stored, so it runs
// libtorch's form inside the graph and is checked at its first use outside one.
bool kernel_verdict(const std::string& kernel, const std::string& shape_class, const torch::Tensor& input,
                    const std::function<KernelComparison()>& check);
// Whether the test hook (set_wrong_kernel) names `kernel`.
bool kernel_made_wrong(const std::string& kernel);

// Whether `kernel` may run these inputs (q [.., M], v [.., D], the gates as given): checked at the class's first use.
bool kernel_trusted(CustomKernel kernel, const torch::Tensor& q, const torch::Tensor& v, const torch::Tensor& log_a,
                    const torch::Tensor& log_b);
// The kernel as it runs (with the test hook's error where set).
DecayKernel custom_kernel(CustomKernel kernel);

}  // namespace fwlab::kernels

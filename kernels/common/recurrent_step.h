// One token of a fast-weight recurrence off the CPU: the decode step of both kernel families (the decay family's
// decay_recurrence and the delta family's delta_family_recurrence take it for a single token without gradients).
// The parallel forms would pad the token to a whole chunk; here it is one launch of the CUDA step kernel
// (kernels/cuda/recurrent_step.h) where fwlab was built with CUDA, else libtorch's step forms (kernels/naive.cpp),
// which are also the kernel's twin: the first time a process steps a class of inputs (device, dtype, D, M, family,
// gates) the kernel is compared with them on those inputs, and a class that disagrees runs libtorch's step from
// then on, reported as kernel_guard.h reports a fallback. The CPU keeps its own fused kernels, which serve steps.
#pragma once

#include <torch/torch.h>

#include "kernels/common/recurrence.h"

namespace fwlab::kernels {

// [B, H, 1, .] as the parallel forms take them. Decay family: log_a (width 1 or D), log_b (width 1 or M), either
// undefined for no gate. Delta family: beta [B, H, 1, 1] defined, alpha too for the gated delta rule.
struct StepInputs {
  torch::Tensor q, k, v, log_a, log_b, alpha, beta, state0;
};

// The step kernel's name in fallback reports and in the test hook (set_wrong_kernel).
inline constexpr const char* kCudaStepKernel = "recurrent_step_cuda";

// Whether a recurrence call is such a step: one token, not on the CPU, no gradient to follow.
bool one_token_step_applies(const StepInputs& in);

// y [B, H, 1, D] in q's and v's common dtype, the new state [B, H, D, M] in fp32 (fp64 for fp64 inputs).
RecurrenceResult one_token_step(const StepInputs& in);

// libtorch's step forms on the same inputs, with the same widening (the kernel's twin; tests).
RecurrenceResult one_token_step_libtorch(const StepInputs& in);

}  // namespace fwlab::kernels

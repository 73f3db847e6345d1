// What every sequence kernel shares (kernels/decay/decay.h, kernels/delta/delta.h, kernels/sru/sru.h): the result
// of a recurrence, whether a backward can follow, the fp32 widening of 16-bit inputs. Each fast form has a plain
// per-timestep twin (suffix _naive, kernels/naive.cpp) written as a loop of libtorch ops; tests bind the two in
// float64, outputs and gradients. All functions are device-agnostic: results follow the inputs' device and dtype.
#pragma once

#include <torch/torch.h>

namespace fwlab::kernels {

// Whether a backward can follow: grad mode is on and some defined input requires a gradient (the forms that keep
// nothing for a backward, or race without one, ask this).
inline bool gradients_needed(std::initializer_list<torch::Tensor> inputs) {
  if (!torch::GradMode::is_enabled()) return false;
  for (const auto& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

struct RecurrenceResult {
  torch::Tensor y;      // outputs
  torch::Tensor state;  // final state (for step-by-step continuation and state-norm monitoring)
};

// bfloat16 / float16 tensors as float32, others unchanged: the dtype of gates, states and the CPU kernels under
// mixed precision (the matrix products around them stay in low precision).
torch::Tensor widened_to_fp32(const torch::Tensor& x);

}  // namespace fwlab::kernels

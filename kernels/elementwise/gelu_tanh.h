// GPT-2's GELU (the tanh approximation, Hugging Face's gelu_new) on the CPU, one pass forward and one backward.
// libtorch 1.13's gelu(approximate = "tanh") runs its AVX2 Sleef tanh: 2.7 ms a million floats on one core here
// (its exact erf GELU: 0.7 ms), 11 % of a small MQAR model's training step. Written as
//   0.5 x (1 + tanh z) = x sigmoid(2 z),   z = sqrt(2 / pi) (x + 0.044715 x^3),
// with kernels/elementwise/exp_approx.h, so the loop vectorises; the backward reuses the forward's sigmoid.
// Taken on the CPU for float32 / float64 outside autocast; anything else is torch::gelu(x, "tanh") itself, its twin
// (tests/test_elementwise_kernels.cpp binds them, values and gradients).
#pragma once

#include <torch/torch.h>

namespace fwlab::kernels {

torch::Tensor gelu_tanh(const torch::Tensor& x);

// Whether gelu_tanh runs its own loops for x (rather than torch::gelu).
bool gelu_tanh_loop_applies(const torch::Tensor& x);

}  // namespace fwlab::kernels

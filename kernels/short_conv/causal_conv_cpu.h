// The short causal convolution (models/short_conv.h: one filter of K taps per channel, an optional bias, then SiLU
// or nothing) on the CPU in the layout the layers hold, x [B, T, C], forward and backward each one loop over the
// sequence. libtorch 1.13 runs it as a grouped conv1d on [B, C, T] through oneDNN, with a transposed copy each way
// and SiLU as passes of their own: a third of a small MQAR model's training step (B 64, T 64, C 192, K 4), mostly
// convolution_backward. Taken on the CPU for float32 / float64 outside autocast, without a step cache; anything else
// is models/short_conv.cpp's conv1d, its twin (tests/test_elementwise_kernels.cpp binds them, values and gradients).
#pragma once

#include <torch/torch.h>

namespace fwlab::kernels {

// x [B, T, C], weight [C, 1, K], bias [C] or undefined: [B, T, C], y_t = act(b + sum_j w[:, j] x_{t-K+1+j}) with the
// inputs before the first step zero; act = SiLU where `silu`, else the identity.
torch::Tensor causal_conv_cpu(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                              bool silu);

// Whether causal_conv_cpu takes these inputs.
bool causal_conv_cpu_applies(const torch::Tensor& x);

}  // namespace fwlab::kernels

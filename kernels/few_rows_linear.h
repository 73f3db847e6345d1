// x Wᵀ + b for an input of a few rows: a decode step's token (or a small batch of them) through a weight matrix.
// libtorch sends such a product to OpenBLAS's small-matrix sgemm, one thread, which on the quick generation model
// (d = 256, ff = 1,024) read weights at ~9 GB/s and took 60 % of a decay layer's step. Here each output is a dot
// product over a contiguous weight row, vectorised (vector_clones.h), the rows split over libtorch's threads: the
// same weights stream at ~36 GB/s on two cores (measured side by side, 16 weights of that model: 0.35 against
// 1.68 ms).
// Taken on the CPU for float32/float64 without gradients or autocast and at most kFewRows rows; anything else is
// torch::linear itself, its twin (tests/test_kernels.cpp binds them).
#pragma once

#include <torch/torch.h>

namespace fwlab::kernels {

constexpr int64_t kFewRows = 4;

// x [..., K], weight [N, K], bias [N] or undefined: [..., N], as torch::linear.
torch::Tensor few_rows_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias = {});

// Whether few_rows_linear runs its own loop for these inputs (rather than torch::linear).
bool few_rows_loop_applies(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

}  // namespace fwlab::kernels

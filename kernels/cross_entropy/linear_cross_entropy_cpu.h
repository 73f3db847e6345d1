// The output layer and the mean cross-entropy in one: loss = mean_i CE(x_i W^T, t_i) for the rows that carry a
// label, with its gradients for x and W computed in the same pass, a block of rows at a time, so that the rows'
// logits (N x V: 32 MB at a 8,192-word vocabulary and a thousand labelled positions) are never held whole.
// libtorch's form (a product, cross_entropy, and the product's backward) has the BLAS write those logits into a
// fresh buffer, read them back, write their gradient and read it twice more: perf of Zoology's MQAR model on a
// two-core AVX2 EPYC found OpenBLAS at 61 % of the worker's time, a third of that its packing and beta passes, the
// loss loop 7 % and page faults on the fresh buffers 4 % more. Fused, whole steps took 18-27 % less time there.
// Taken on the CPU for float32 / float64 outside autocast, x [N, D] and W [V, D] of one dtype; anything else is
// torch::linear followed by libtorch's cross_entropy, its twin (tests/test_elementwise_kernels.cpp binds them, the loss
// and both gradients, in float64). Every target must be a class: ignored labels are removed before.
#pragma once

#include <torch/torch.h>

namespace fwlab::kernels {

// x [N, D], weight [V, D], targets [N] (classes in [0, V)): the mean loss, a scalar of x's dtype.
torch::Tensor linear_cross_entropy_mean(const torch::Tensor& x, const torch::Tensor& weight,
                                        const torch::Tensor& targets);

bool linear_cross_entropy_loop_applies(const torch::Tensor& x, const torch::Tensor& weight);

}  // namespace fwlab::kernels

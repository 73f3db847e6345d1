// The mean cross-entropy of logits [N, V] against targets [N] on the CPU in one pass over the logits: each row's
// log-sum-exp, and its gradient (softmax - one-hot) / N written beside it, so that the backward only scales it.
// libtorch's cross_entropy makes log_softmax, NLL, a zero-filled gradient and log_softmax's backward four passes
// over the N x V floats: at an 8,192-word vocabulary and 256 labelled positions (a small MQAR model's step) 12 %
// of the step. Taken on the CPU for float32 / float64 logits outside autocast; anything else is
// torch::nn::functional::cross_entropy itself, its twin (tests/test_elementwise_kernels.cpp binds them, loss and
// gradient). Every target must be a class: ignored labels are removed before (GPT::labelled_logits).
#pragma once

#include <torch/torch.h>

namespace fwlab::kernels {

torch::Tensor cross_entropy_mean(const torch::Tensor& logits, const torch::Tensor& targets);

bool cross_entropy_loop_applies(const torch::Tensor& logits);

// One row of that loop, for the fused output layer (linear_cross_entropy_cpu.h): returns log sum_j e^{l_j} - l_target
// and writes (softmax - one-hot) * inv_n to g (NaN, and a NaN loss, where a logit is not finite); l and g disjoint.
float cross_entropy_row(const float* l, float* g, int64_t V, int64_t target, float inv_n);
double cross_entropy_row(const double* l, double* g, int64_t V, int64_t target, double inv_n);

}  // namespace fwlab::kernels

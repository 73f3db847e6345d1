// AdamW's update and the gradients' global norm on the CPU, one pass over each tensor. worker/optimizer.cpp's
// libtorch form (eight operators a parameter, clip_grad_norm_'s two more) is their twin; on a small model (a
// 2-layer MQAR model: 38 tensors, 0.6 M elements) those ~380 calls cost more than the arithmetic.
// tests/test_elementwise_kernels.cpp binds both to the twins.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace fwlab::kernels {

struct AdamWStep {
  double lr, beta1, beta2, eps;
  double decay_factor;  // 1 - lr * weight_decay, or 1 for a tensor that does not decay
  double bias_correction1, bias_correction2;
};

// Whether the loop takes this parameter: CPU, float32 or float64, it and its gradient and moments contiguous.
bool adamw_loop_applies(const torch::Tensor& param, const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq);

// p *= decay_factor; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= lr / bc1 * m / (sqrt(v / bc2) + eps).
void adamw_update_cpu(torch::Tensor& param, torch::Tensor& exp_avg, torch::Tensor& exp_avg_sq, const AdamWStep& s);

// The gradients' global 2-norm (in double), and each scaled by min(1, max_norm / (norm + 1e-6)) as
// torch::nn::utils::clip_grad_norm_ does; its return value. Undefined gradients are skipped. CPU float32 / float64
// contiguous gradients only (grads_fit_clip_loop says).
double clip_grad_norm_cpu(const std::vector<torch::Tensor>& params, double max_norm);
bool grads_fit_clip_loop(const std::vector<torch::Tensor>& params);

}  // namespace fwlab::kernels

// fairseq's label_smoothed_cross_entropy (Szegedy et al. 2016): cross entropy against a target distribution that
// puts 1 - eps on the reference token and eps / (V - 1) on each other token.
#pragma once

#include <torch/torch.h>

namespace fwlab {

struct SmoothedLoss {
  torch::Tensor loss;  // summed over the non-ignored positions (differentiable)
  torch::Tensor nll;   // the plain negative log-likelihood, summed likewise (detached): what validation reports
};

// logits [..., V], target [...]; positions whose target is `ignore` count for nothing.
SmoothedLoss label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& target, double eps, int64_t ignore);

}  // namespace fwlab

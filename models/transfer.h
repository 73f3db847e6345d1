// Attention transfer (LoLCATs' first stage; Zhang et al. 2024, "LoLCATs: On Low-Rank Linearizing of Large
// Language Models"): every layer whose mixer the student swapped learns to reproduce the teacher's mixer output.
#pragma once

#include <vector>

#include "models/gpt.h"

namespace fwlab {

// The layers where the student's mixer differs from the teacher's (the ones to transfer).
std::vector<size_t> transferred_layers(const GPT& student, const GPT& teacher);

// Per-layer mean squared error between the student's and the teacher's mixer outputs (after W_o: what the
// residual stream receives, and the quantity LoLCATs matches), both fed the teacher's hidden states (ln1 of the
// residual stream after the layers below), so each layer's loss depends on its own parameters only: training
// the layers jointly or one by one is the same problem. The teacher runs without gradients.
std::vector<torch::Tensor> transfer_mse(GPT& student, GPT& teacher, const torch::Tensor& idx,
                                        const std::vector<size_t>& layers);

}  // namespace fwlab

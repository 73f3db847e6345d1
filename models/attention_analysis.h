// What the converted attention looks like (Kasai et al. 2021, "Finetuning Pretrained Transformers into RNNs",
// Figs. 5-6): each layer's and head's implied attention over the preceding positions, compared with the softmax
// teacher's on the same text: mean Euclidean distance between the two distributions and their entropies.
#pragma once

#include <vector>

#include "models/gpt.h"

namespace fwlab {

// Implied attention weights from a mixer's value coefficients [B, H, C, T, T] (Mixer::value_coefficients): the
// coefficients averaged over value channels, then w_ts = |c_ts| / sum_s' |c_ts'|. With a positive feature map and
// attention normalization this is the layer's own normalized attention (gates and decay products included);
// without normalization, or with a signed map, it is the share of position s in the coefficient mass of y_t. A
// query whose coefficients are all zero (a ReLU map that switched every feature off) gets an all-zero row.
torch::Tensor implied_attention(const torch::Tensor& coefficients);  // [B, H, T, T]
// Entropy in nats of each row of w [B, H, T, T] (0 log 0 = 0): [B, H, T].
torch::Tensor attention_entropy(const torch::Tensor& w);

// Sums over query positions, per compared layer and head.
struct AttentionStats {
  std::vector<size_t> layers;  // the layers where both models have attention coefficients
  std::vector<std::vector<double>> distance, entropy, teacher_entropy;  // [layer index][head]
  int64_t queries = 0;  // query positions summed per head (batch x length)
};

// Runs both models on `idx` (each on its own residual stream: what each model really attends to) and adds every
// compared layer's and head's distance and entropies to `stats`. The models must have the same number of layers
// and heads. No gradients.
void add_attention_stats(GPT& student, GPT& teacher, const torch::Tensor& idx, AttentionStats& stats);

}  // namespace fwlab

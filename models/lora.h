// LoRA adapters (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models") on the attention
// projections, as LoLCATs fine-tunes a linearised model: for each of q, k, v (the fused qkv) and o, a rank-r
// update W + (alpha / r) B A with A [r, in] drawn like nn.Linear's weight (PEFT's choice) and B = 0, so a model
// with fresh adapters computes exactly what the base does. merge_lora (models/convert.h) folds them in.
#pragma once

#include <torch/torch.h>

namespace fwlab {

class LoraAdapterImpl : public torch::nn::Module {
 public:
  // `parts` independent adapters side by side (3 for the fused qkv, 1 for o), each from `in` to `out` features.
  LoraAdapterImpl(int64_t parts, int64_t in, int64_t out, int64_t rank, double scale);
  // x [..., in] -> the update [..., parts * out].
  torch::Tensor forward(const torch::Tensor& x) const;
  // The same update as a weight [parts * out, in], to add to the base Linear's weight.
  torch::Tensor delta() const;

  torch::Tensor a, b;  // [parts, rank, in], [parts, out, rank]
  double scale;
};
TORCH_MODULE(LoraAdapter);

// base(x) plus the adapter's update when there is one.
torch::Tensor with_lora(torch::nn::Linear& base, const LoraAdapter& lora, const torch::Tensor& x);

}  // namespace fwlab

// LoRA adapters (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models") on the attention
// projections, as LoLCATs fine-tunes a linearised model: for each of q, k, v (the fused qkv) and o, a rank-r
// update W + (alpha / r) B A with A [r, in] drawn like nn.Linear's weight (PEFT's choice) and B = 0, so a model
// with fresh adapters computes exactly what the base does. merge_lora (models/convert.h) folds them in.
#pragma once

#include <torch/torch.h>

namespace fwlab {

class LoraAdapterImpl : public torch::nn::Module {
 public:
  // Independent adapters side by side (q, k, v for the fused qkv; o alone), each from `in` to outs[p] features.
  // Parts of one size keep b as [parts, out, rank] (the layout of checkpoints made before grouped-query attention);
  // parts of different sizes (q against the fewer k, v heads of GQA) stack b as [sum of outs, rank].
  LoraAdapterImpl(const std::vector<int64_t>& outs, int64_t in, int64_t rank, double scale);
  // x [..., in] -> the update [..., parts * out].
  torch::Tensor forward(const torch::Tensor& x) const;
  // The same update as a weight [parts * out, in], to add to the base Linear's weight.
  torch::Tensor delta() const;

  torch::Tensor a, b;  // [parts, rank, in], [parts, out, rank] or [sum of outs, rank]
  double scale;

 private:
  torch::Tensor b_part(size_t p) const;  // [outs[p], rank]
  std::vector<int64_t> outs_;
  bool equal_parts_;
};
TORCH_MODULE(LoraAdapter);

// base(x) plus the adapter's update when there is one.
torch::Tensor with_lora(torch::nn::Linear& base, const LoraAdapter& lora, const torch::Tensor& x);

}  // namespace fwlab

// The normalization of a block: LayerNorm (GPT-2: weight and bias) or RMSNorm (Llama: weight only). One module
// under the names GPT-2's LayerNorm had (weight, bias), so checkpoints made before RMSNorm existed load unchanged.
#pragma once

#include <torch/torch.h>

#include <string>

namespace fwlab {

class BlockNormImpl : public torch::nn::Module {
 public:
  BlockNormImpl(const std::string& kind, int64_t d, double eps);
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor weight, bias;  // bias: LayerNorm only

 private:
  bool rms_;
  double eps_;
};
TORCH_MODULE(BlockNorm);

}  // namespace fwlab

// One matrix product for several Linear layers that read the same input: a fast-weight layer's q, k, v and its
// rule's gate projections (z and f, β, α). On a GPU that is one GEMM launch instead of three to five, each of them
// too narrow to fill the card at decode; on the CPU one pass over x. The layers keep their own parameters, so
// checkpoints, Hugging Face export and conversion see the same names as before.
//
// The product uses the layers' concatenated weights. While gradients are recorded they are concatenated per call
// (the concatenation's backward hands each layer its own slice of the gradient); otherwise the concatenation is
// kept until a parameter changes (an optimiser step, a load, a move to another device or dtype), because a decode
// step would else copy every weight per token.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace fwlab {

class FusedProjection {
 public:
  // x [..., d] -> one output [..., out_features] per layer, in the layers' order: views of a single product. A
  // layer without a bias counts as a zero bias; with no bias anywhere the product has none.
  std::vector<torch::Tensor> operator()(const torch::Tensor& x, const std::vector<torch::nn::Linear>& layers);

 private:
  // What identifies a parameter's current values: its tensor, storage, dtype and in-place version.
  struct Stamp {
    const void* impl = nullptr;
    const void* data = nullptr;
    int64_t dtype = -1;
    uint32_t version = 0;
    bool operator==(const Stamp& other) const {
      return impl == other.impl && data == other.data && dtype == other.dtype && version == other.version;
    }
  };
  static std::vector<Stamp> stamps(const std::vector<torch::nn::Linear>& layers);
  static std::pair<torch::Tensor, torch::Tensor> concatenated(const std::vector<torch::nn::Linear>& layers);

  std::vector<Stamp> cached_stamps_;
  torch::Tensor cached_weight_, cached_bias_;
};

}  // namespace fwlab

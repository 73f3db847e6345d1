// Kernel feature maps phi applied per head to queries and keys (NOTES.md, "Feature maps").
#pragma once

#include <torch/torch.h>

#include "contract/model_config.h"

namespace fwlab {

class FeatureMap : public torch::nn::Module {
 public:
  FeatureMap(const MixerSpec& spec, int64_t n_heads, int64_t head_dim);

  // x: [B, H, T, head_dim] or [B, H, head_dim]. Queries of learned maps are scaled by head_dim^-1/2 first,
  // as T2R does, so that phi(q).phi(k) starts on the scale of the softmax logits.
  torch::Tensor forward(const torch::Tensor& x, bool is_query);

  // relu and identity are a (per-head) linear projection followed by an elementwise nonlinearity, so the
  // projection can be folded into W_q / W_k (T2R eq. 8). activate() applies only the nonlinearity.
  bool is_projection() const { return kind_ == "relu" || kind_ == "identity"; }
  torch::Tensor activate(const torch::Tensor& projected) const;
  double query_scale() const { return query_scale_; }

  // rfa: draw new random features (training); at eval the last draw stays fixed.
  void resample();

  const std::string& kind() const { return kind_; }
  torch::Tensor weight, bias;   // relu / identity: [H, m, head_dim], [H, m] (identity has no bias)
  torch::Tensor log_sigma;      // rfa: learned log standard deviation of the random projection, [H]
  torch::Tensor omega;          // rfa buffer: standard-normal draws, [H, m/2, head_dim]
  torch::Tensor weight_q, weight_k;  // hedgehog: [H, m/2, head_dim] each

 private:
  torch::Tensor project(const torch::Tensor& x) const;  // per-head x W^T (+ b)

  std::string kind_;
  int64_t nu_ = 1;
  double query_scale_ = 1.0;
};

}  // namespace fwlab

// Kernel feature maps φ applied per head to queries and keys (NOTES.md, "Feature maps"). Each map's torch-free
// row (contract/model/feature_map_table.h) says what it costs and which sizes it takes; the class here computes it. A
// new map is one file here, its row and one line in registry.cpp.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "contract/model/model_config.h"

namespace fwlab {

class FeatureMap : public torch::nn::Module {
 public:
  // x: [B, H, T, head_dim] or [B, H, head_dim] (one step).
  virtual torch::Tensor forward(const torch::Tensor& x, bool is_query) = 0;
  // Maps with random features draw new ones (training); others keep what they have.
  virtual void resample() {}
};

// relu and identity: a per-head linear projection followed by an elementwise function, so the projection can be
// folded into W_q / W_k (T2R eq. 8). Queries are scaled by head_dim^-1/2 first, as T2R does, so that
// φ(q)·φ(k) starts on the scale of the softmax logits.
class ProjectionMap : public FeatureMap {
 public:
  ProjectionMap(int64_t n_heads, int64_t m, int64_t head_dim, bool relu);
  torch::Tensor forward(const torch::Tensor& x, bool is_query) override;
  torch::Tensor activate(const torch::Tensor& projected) const;  // the elementwise function alone
  double query_scale() const { return query_scale_; }
  bool relu() const { return relu_; }  // the activation after the projection: relu, or none

  torch::Tensor weight, bias;  // [H, m, head_dim], [H, m] (identity has no bias)

 private:
  bool relu_;
  double query_scale_;
};

using FeatureMapFactory = std::shared_ptr<FeatureMap> (*)(const MixerSpec& spec, int64_t n_heads, int64_t head_dim);

// The map named by spec.feature_map (models/feature_maps/registry.cpp); throws ConfigError for a name it does not hold.
std::shared_ptr<FeatureMap> make_feature_map(const MixerSpec& spec, int64_t n_heads, int64_t head_dim);
// The names the registry holds (a test binds them to contract/model/feature_map_table.h).
std::vector<std::string> registered_feature_maps();

// Per-head x Wᵀ for W [H, n, head_dim], x [B, H, T, head_dim] or [B, H, head_dim].
torch::Tensor project_heads(const torch::Tensor& x, const torch::Tensor& w);

}  // namespace fwlab

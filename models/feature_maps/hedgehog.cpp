// [softmax(W x), softmax(-W x)] over the features, per head: positive, sums to 2. As LoLCATs uses it: separate
// query and key maps without bias, initialised to the identity (rectangular where m/2 != head_dim), and no query
// scaling (the maps learn the temperature).
#include "models/feature_maps/hedgehog.h"

namespace fwlab {

namespace {

class HedgehogMap : public FeatureMap {
 public:
  HedgehogMap(int64_t n_heads, int64_t m, int64_t head_dim) {
    auto eye = torch::eye(m / 2, head_dim).unsqueeze(0).repeat({n_heads, 1, 1});
    weight_q_ = register_parameter("weight_q", eye.clone());
    weight_k_ = register_parameter("weight_k", eye.clone());
  }
  torch::Tensor forward(const torch::Tensor& x, bool is_query) override {
    auto p = project_heads(x, is_query ? weight_q_ : weight_k_);
    return torch::cat({torch::softmax(p, -1), torch::softmax(-p, -1)}, -1);
  }

 private:
  torch::Tensor weight_q_, weight_k_;  // [H, m/2, head_dim] each
};

}  // namespace

std::shared_ptr<FeatureMap> make_hedgehog_map(const MixerSpec& spec, int64_t n_heads, int64_t head_dim) {
  return std::make_shared<HedgehogMap>(n_heads, spec.m, head_dim);
}

}  // namespace fwlab

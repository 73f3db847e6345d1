// φ(x) = concat_{i=1..ν} r ⊙ roll(r, i), r = [relu(x), relu(-x)]: size 2·ν·head_dim.
#include "models/feature_maps/dpfp.h"

namespace fwlab {

namespace {

class DpfpMap : public FeatureMap {
 public:
  explicit DpfpMap(int64_t nu) : nu_(nu) {}
  torch::Tensor forward(const torch::Tensor& x, bool) override {
    auto r = torch::cat({torch::relu(x), torch::relu(-x)}, -1);
    std::vector<torch::Tensor> parts;
    for (int64_t i = 1; i <= nu_; ++i) parts.push_back(r * torch::roll(r, {i}, {-1}));
    return torch::cat(parts, -1);
  }

 private:
  int64_t nu_;
};

}  // namespace

std::shared_ptr<FeatureMap> make_dpfp_map(const MixerSpec& spec, int64_t, int64_t) {
  return std::make_shared<DpfpMap>(spec.dpfp_nu);
}

}  // namespace fwlab

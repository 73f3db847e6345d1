#include "models/feature_maps/elu1.h"

namespace fwlab {

namespace {

class Elu1Map : public FeatureMap {
 public:
  torch::Tensor forward(const torch::Tensor& x, bool) override { return torch::elu(x) + 1; }
};

}  // namespace

std::shared_ptr<FeatureMap> make_elu1_map(const MixerSpec&, int64_t, int64_t) { return std::make_shared<Elu1Map>(); }

}  // namespace fwlab

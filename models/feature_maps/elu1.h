// The 'elu1' map, elu(x) + 1 (Katharopoulos et al. 2020).
#pragma once

#include "models/feature_maps/feature_map.h"

namespace fwlab {

std::shared_ptr<FeatureMap> make_elu1_map(const MixerSpec& spec, int64_t n_heads, int64_t head_dim);

}  // namespace fwlab

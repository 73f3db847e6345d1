// The 'hedgehog' map (Zhang et al. 2024) as LoLCATs uses it.
#pragma once

#include "models/feature_maps/feature_map.h"

namespace fwlab {

std::shared_ptr<FeatureMap> make_hedgehog_map(const MixerSpec& spec, int64_t n_heads, int64_t head_dim);

}  // namespace fwlab

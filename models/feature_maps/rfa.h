// The 'rfa' map, random Fourier features of the unit vector (Peng et al. 2021).
#pragma once

#include "models/feature_maps/feature_map.h"

namespace fwlab {

std::shared_ptr<FeatureMap> make_rfa_map(const MixerSpec& spec, int64_t n_heads, int64_t head_dim);

}  // namespace fwlab

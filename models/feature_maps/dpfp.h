// The 'dpfp' map (Schlag et al. 2021, deterministic parameter-free projection).
#pragma once

#include "models/feature_maps/feature_map.h"

namespace fwlab {

std::shared_ptr<FeatureMap> make_dpfp_map(const MixerSpec& spec, int64_t n_heads, int64_t head_dim);

}  // namespace fwlab

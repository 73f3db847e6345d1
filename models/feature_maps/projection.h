// The projection maps 'relu' (T2R's learned ReLU map) and 'identity' (Mao's "φ ✗", a linear projection).
#pragma once

#include "models/feature_maps/feature_map.h"

namespace fwlab {

std::shared_ptr<FeatureMap> make_relu_map(const MixerSpec& spec, int64_t n_heads, int64_t head_dim);
std::shared_ptr<FeatureMap> make_identity_map(const MixerSpec& spec, int64_t n_heads, int64_t head_dim);

}  // namespace fwlab

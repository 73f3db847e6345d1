// The kernel feature maps φ of a fast-weight layer, one row each: the torch-free facts that validation,
// parameter counts and descriptions read. models/feature_maps/ implements each row (its registry is checked
// against this table by a test); nothing outside the two compares feature-map names.
#pragma once

#include <string>
#include <vector>

#include "contract/model/model_config.h"
#include "contract/model/rule_table.h"

namespace fwlab {

struct FeatureMapRow {
  std::string name;
  std::string source;
  // A per-head projection followed by an elementwise function: T2R's inference folding (eq. 8) applies.
  bool foldable = false;
  bool linear = false;   // no nonlinearity: φ is a linear projection (Mao's "φ ✗")
  bool uses_nu = false;  // the `dpfp_nu` key applies
  int64_t (*parameters)(const LayerDims&) = nullptr;
  // Throws ConfigError (field `prefix` + key) for a size m (or ν) this map cannot have; nullptr: any m.
  void (*check_size)(const MixerSpec&, const LayerDims&, const std::string& prefix) = nullptr;
};

const std::vector<FeatureMapRow>& feature_map_table();
// The row of a map; nullptr for a name that is none.
const FeatureMapRow* find_feature_map(const std::string& name);
std::vector<std::string> feature_map_names();

}  // namespace fwlab

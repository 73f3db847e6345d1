// The feature maps fwlab knows, by name: a new map is its files and one line here (and its row in
// contract/model/feature_map_table.cpp, which a test binds to this list).
#include <fmt/format.h>

#include "contract/model/named_rows.h"
#include "models/feature_maps/dpfp.h"
#include "models/feature_maps/elu1.h"
#include "models/feature_maps/hedgehog.h"
#include "models/feature_maps/projection.h"
#include "models/feature_maps/rfa.h"

namespace fwlab {

namespace {

struct FeatureMapRow {
  std::string name;
  FeatureMapFactory make;
};

const std::vector<FeatureMapRow>& feature_map_rows() {
  static const std::vector<FeatureMapRow> maps = {
      {"relu", make_relu_map}, {"elu1", make_elu1_map}, {"identity", make_identity_map},
      {"dpfp", make_dpfp_map}, {"rfa", make_rfa_map},   {"hedgehog", make_hedgehog_map},
  };
  return maps;
}

}  // namespace

std::shared_ptr<FeatureMap> make_feature_map(const MixerSpec& spec, int64_t n_heads, int64_t head_dim) {
  if (const auto* entry = find_named_row(feature_map_rows(), spec.feature_map))
    return entry->make(spec, n_heads, head_dim);
  throw ConfigError("feature_map", fmt::format("no feature map '{}' is registered", spec.feature_map));
}

std::vector<std::string> registered_feature_maps() { return row_names(feature_map_rows()); }

torch::Tensor project_heads(const torch::Tensor& x, const torch::Tensor& w) {
  if (x.dim() == 3) return torch::matmul(x.unsqueeze(-2), w.transpose(-1, -2)).squeeze(-2);
  if (w.dim() != 3 || w.size(0) != x.size(1)) return torch::matmul(x, w.transpose(-1, -2));
  // [B, H, T, hd] as one [B T, hd] x [hd, m] product per head: a matmul broadcasting w over B ran B H small
  // products, each a libtorch call of its own (1.13's bmm loops over the batch).
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2);
  auto per_head = x.transpose(0, 1).reshape({H, B * T, x.size(3)});
  return torch::bmm(per_head, w.transpose(-1, -2)).view({H, B, T, w.size(1)}).transpose(0, 1);
}

}  // namespace fwlab

#include "contract/model/feature_map_table.h"

#include <fmt/format.h>

#include "contract/model/named_rows.h"

namespace fwlab {

namespace {

int64_t no_map_parameters(const LayerDims&) { return 0; }
int64_t projection_with_bias(const LayerDims& d) { return d.n_heads * (d.m * d.head_dim + d.m); }
int64_t projection(const LayerDims& d) { return d.n_heads * d.m * d.head_dim; }
int64_t temperature_per_head(const LayerDims& d) { return d.n_heads; }
int64_t query_and_key_projections(const LayerDims& d) { return 2 * d.n_heads * (d.m / 2) * d.head_dim; }

void m_is_head_dim(const MixerSpec& s, const LayerDims& d, const std::string& p) {
  if (s.m != d.head_dim)
    throw ConfigError(
        p + "m",
        fmt::format("feature map 'elu1' keeps the head dimension: m must be head_dim = {}, got {}", d.head_dim, s.m));
}

void dpfp_size(const MixerSpec& s, const LayerDims& d, const std::string& p) {
  if (s.dpfp_nu < 1 || s.dpfp_nu > 3) throw ConfigError(p + "dpfp_nu", fmt::format("must be 1..3, got {}", s.dpfp_nu));
  if (s.m != 2 * s.dpfp_nu * d.head_dim)
    throw ConfigError(
        p + "m", fmt::format("feature map 'dpfp' with nu = {} has size 2 * nu * head_dim = {}, got m = {}", s.dpfp_nu,
                             2 * s.dpfp_nu * d.head_dim, s.m));
}

void rfa_even(const MixerSpec& s, const LayerDims&, const std::string& p) {
  if (s.m % 2 != 0)
    throw ConfigError(
        p + "m", fmt::format("feature map 'rfa' is [sin, cos] of m/2 random features: m must be even, got {}", s.m));
}

void hedgehog_even(const MixerSpec& s, const LayerDims&, const std::string& p) {
  if (s.m % 2 != 0)
    throw ConfigError(
        p + "m",
        fmt::format("feature map 'hedgehog' is [softmax(Wx), softmax(-Wx)] of m/2 projections: m must be even, got {}",
                    s.m));
}

}  // namespace

const std::vector<FeatureMapRow>& feature_map_table() {
  static const std::vector<FeatureMapRow> rows = {
      {"relu", "Kasai et al. 2021 (T2R)", true, false, false, projection_with_bias, nullptr},
      {"elu1", "Katharopoulos et al. 2020", false, false, false, no_map_parameters, m_is_head_dim},
      {"identity", "Mao 2022 (\"phi off\")", true, true, false, projection, nullptr},
      {"dpfp", "Schlag et al. 2021", false, false, true, no_map_parameters, dpfp_size},
      {"rfa", "Peng et al. 2021", false, false, false, temperature_per_head, rfa_even},
      {"hedgehog", "Zhang et al. 2024", false, false, false, query_and_key_projections, hedgehog_even},
  };
  return rows;
}

const FeatureMapRow* find_feature_map(const std::string& name) { return find_named_row(feature_map_table(), name); }

std::vector<std::string> feature_map_names() { return row_names(feature_map_table()); }

}  // namespace fwlab

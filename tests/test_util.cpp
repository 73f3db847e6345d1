#include "tests/test_util.h"

namespace fwlab::test {

MixerSpec fw(const std::string& rule, const std::string& feature_map, const std::string& norm, int64_t m) {
  MixerSpec s;
  s.kind = "fast_weight";
  s.rule = rule;
  s.feature_map = feature_map;
  s.norm = norm;
  s.m = m;
  return s;
}

ModelConfig small_config(const MixerSpec& mixer, int64_t n_layers, int64_t head_dim) {
  ModelConfig cfg;
  cfg.vocab = 50;
  cfg.d_model = 16;
  cfg.n_layers = n_layers;
  cfg.n_heads = 2;
  cfg.head_dim = head_dim;
  cfg.context = 64;
  cfg.dropout = 0.0;
  apply_plan(cfg, LayerPlan{mixer});
  return cfg;
}

}  // namespace fwlab::test

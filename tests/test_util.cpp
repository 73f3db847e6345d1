#include "tests/test_util.h"

#include <catch2/catch.hpp>

#include "kernels/blas_core.h"
#include "models/hf_import.h"

namespace fwlab::test {

nlohmann::json write_python_model(const std::string& script, const std::filesystem::path& dir,
                                  const std::string& args) {
  auto r = run_command("/usr/bin/python3 " FWLAB_SOURCE_DIR "/tests/python/" + script + " write " + dir.string() + " " +
                       args);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto expected = dir / "expected.json";
  return std::filesystem::exists(expected) ? nlohmann::json::parse(slurp(expected.string())) : nlohmann::json();
}

std::string hf_import_error(const std::filesystem::path& dir) {
  try {
    load_hf(dir.string());
  } catch (const safetensors::FormatError& e) {
    return e.what();
  }
  return "(no error)";
}

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

ModelConfig every_rule_config() {
  auto gated_delta = fw("gated_delta", "identity", "none", 16), deltanet = fw("delta", "identity", "none", 16);
  gated_delta.key_norm = deltanet.key_norm = "l2";
  deltanet.conv = 4, deltanet.out_norm = "rmsnorm", deltanet.beta_init = 0.5;
  auto cfg = small_config(MixerSpec{}, 6, 16);
  cfg.layers = {fw("add", "relu", "attn", 16),
                fw("gated", "elu1", "attn", 16),
                fw("decay", "relu", "none", 16),
                fw("delta", "relu", "attn", 8),
                gated_delta,
                deltanet};
  return cfg;
}

}  // namespace fwlab::test

namespace {
// The torch test binaries run on the CPU's own BLAS kernels, as the worker does (kernels/blas_core.h).
const std::string blas_core_in_use = fwlab::use_the_cpus_blas_kernels();
}  // namespace

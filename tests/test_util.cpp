#include "tests/test_util.h"

#include <unistd.h>

#include <atomic>

namespace fwlab::test {

TempDir::TempDir(const std::string& tag) {
  static std::atomic<int> counter{0};
  path_ = std::filesystem::temp_directory_path() /
          ("fwlab-test-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
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

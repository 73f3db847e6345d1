// Helpers shared by the test binaries.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <string>

#include "models/model_config.h"

namespace fwlab::test {

inline double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.detach() - b.detach()).abs().max().item<double>();
}

// A fresh directory under the system temp dir, removed when the object goes away.
class TempDir {
 public:
  explicit TempDir(const std::string& tag);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// A small model configuration with the given mixer on every layer.
ModelConfig small_config(const MixerSpec& mixer, int64_t n_layers = 2, int64_t head_dim = 8);

}  // namespace fwlab::test

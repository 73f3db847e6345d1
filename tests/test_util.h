// Helpers shared by the test binaries.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <string>

#include "contract/model_config.h"
#include "tests/test_support.h"

namespace fwlab::test {

inline double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.detach() - b.detach()).abs().max().item<double>();
}

// A fast-weight mixer spec.
MixerSpec fw(const char* rule, const char* feature_map, const char* norm, int64_t m);

// A small model configuration with the given mixer on every layer.
ModelConfig small_config(const MixerSpec& mixer, int64_t n_layers = 2, int64_t head_dim = 8);

}  // namespace fwlab::test

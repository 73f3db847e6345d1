// Helpers shared by the test binaries.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "contract/model/model_config.h"
#include "tests/test_support.h"

namespace fwlab::test {

inline double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.detach() - b.detach()).abs().max().item<double>();
}

// The inputs of a decay recurrence (kernels/decay/decay.h); undefined tensors are absent gates / a zero state.
struct DecayInputs {
  torch::Tensor q, k, v, log_a, log_b, state0;
  // The defined ones, in that order (the inputs autograd differentiates).
  std::vector<torch::Tensor> all() const {
    std::vector<torch::Tensor> out;
    for (const auto& t : {q, k, v, log_a, log_b, state0})
      if (t.defined()) out.push_back(t);
    return out;
  }
};

// A fast-weight mixer spec.
MixerSpec fw(const std::string& rule, const std::string& feature_map, const std::string& norm, int64_t m);

// A Hugging Face directory written by an independent Python model (tests/python/SCRIPT write DIR ARGS), and its
// expected.json when ARGS ask for one (else null).
nlohmann::json write_python_model(const std::string& script, const std::filesystem::path& dir, const std::string& args);
// The message of the FormatError that importing `dir` raises, or "(no error)".
std::string hf_import_error(const std::filesystem::path& dir);

// A small model configuration with the given mixer on every layer.
ModelConfig small_config(const MixerSpec& mixer, int64_t n_layers = 2, int64_t head_dim = 8);
// Six layers, one per rule and family member: add (ReLU, attn), gated (elu1, attn), decay (ReLU), delta (ReLU, attn),
// gated delta (L2 keys) and DeltaNet's layer (L2 keys, a 4-tap convolution, the output RMSNorm); head_dim 16.
ModelConfig every_rule_config();

}  // namespace fwlab::test

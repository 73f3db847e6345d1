// Rotary position embedding (Su et al. 2021, "RoFormer") in Hugging Face Llama's layout: channel i is rotated with
// channel i + head_dim/2 (the half-split form, not interleaved pairs), both halves sharing a frequency, and the
// context-extension scalings of RopeSpec (linear; llama3 by wavelength).
#pragma once

#include <torch/torch.h>

#include <vector>

#include "contract/model/model_config.h"

namespace fwlab {

// The per-pair frequencies inv_freq[i] = theta^(-2i / head_dim), scaled as `spec` says; computed in double (Hugging
// Face computes them in float32: the difference is below float32's own rounding of the angles it feeds).
std::vector<double> rope_frequencies(const RopeSpec& spec, int64_t head_dim);

class Rope {
 public:
  Rope(const RopeSpec& spec, int64_t head_dim);
  // x [B, H, T, hd] whose first token sits at `position`: x cos + rotate_half(x) sin, in x's dtype.
  torch::Tensor apply(const torch::Tensor& x, int64_t position) const;

 private:
  std::vector<double> inv_freq_;
};

}  // namespace fwlab

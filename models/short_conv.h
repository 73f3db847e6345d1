// A short causal convolution over time, one filter per channel, then SiLU: the token shift DeltaNet and Gated
// DeltaNet (flash-linear-attention's ShortConvolution, kernel 4) and Zoology's Based put on q, k and v before the
// recurrence. Without it a layer of linear attention has no cheap way to attend to the previous token, which
// associative recall needs (a key and its value arrive as neighbours).
#pragma once

#include <torch/torch.h>

namespace fwlab {

// What differs between fla's convolution (no bias, then SiLU) and Zoology's BaseConv's (a bias, no activation).
struct ShortConvOptions {
  bool bias = false;
  bool silu = true;
};

class ShortConvImpl : public torch::nn::Module {
 public:
  ShortConvImpl(int64_t channels, int64_t taps, ShortConvOptions options = {});
  // x [B, T, C] -> [B, T, C]: y_t = silu(sum_j w[:, j] * x_{t - taps + 1 + j} (+ b)), inputs before the first token
  // zero, or the last taps - 1 inputs kept in `cache` [B, C, taps - 1] by the previous call (step form), which is
  // updated. Without options.silu the sum itself.
  torch::Tensor forward(const torch::Tensor& x, torch::Tensor* cache = nullptr);
  // The same product written as a sum of shifted copies (tests bind the two).
  torch::Tensor reference(const torch::Tensor& x) const;

  torch::Tensor weight;  // [C, 1, taps]
  torch::Tensor bias;    // [C] with options.bias (undefined otherwise: fla's default)
  int64_t taps;

 private:
  torch::Tensor activate(const torch::Tensor& y) const { return silu_ ? torch::silu(y) : y; }
  bool silu_;
};
TORCH_MODULE(ShortConv);

}  // namespace fwlab

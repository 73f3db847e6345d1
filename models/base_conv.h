// Zoology's BaseConv ("Zoology: Measuring and Improving Recall in Efficient Language Models", Arora et al. 2023;
// zoology/mixers/base_conv.py): a gated short convolution, y = conv(x) ⊙ (W x + b) + x. Its synthetic-task models
// put one under every other mixer (a 2-layer MQAR model is BaseConv, then the mixer under study): the product of
// a token's neighbours and itself is what lets the next layer find a key's value. The convolution is depthwise, of
// `spec.conv` taps, with a bias and no activation (Zoology's ShortConvolution wraps torch.nn.Conv1d).
#pragma once

#include "models/mixer.h"
#include "models/short_conv.h"

namespace fwlab {

class BaseConv : public Mixer {
 public:
  BaseConv(const MixerSpec& spec, const ModelConfig& cfg);
  torch::Tensor forward(const torch::Tensor& x) override;
  // The convolution's last spec.conv - 1 inputs ride in state.conv.
  torch::Tensor step(const torch::Tensor& x, MixerState& state) override;

  torch::nn::Linear projection{nullptr};
  ShortConv conv{nullptr};

 private:
  torch::Tensor run(const torch::Tensor& x, torch::Tensor* cache);
};

}  // namespace fwlab

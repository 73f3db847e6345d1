#include "models/base_conv.h"

namespace fwlab {

BaseConv::BaseConv(const MixerSpec& spec, const ModelConfig& cfg) {
  // Zoology initialises every Linear as N(0, 0.02) with a zero bias (zoology/model.py, _init_weights) and leaves
  // the convolution at torch.nn.Conv1d's default.
  projection = register_module("projection", torch::nn::Linear(cfg.d_model, cfg.d_model));
  init_gpt2_linear(projection);
  conv = register_module("conv", ShortConv(cfg.d_model, spec.conv, ShortConvOptions{.bias = true, .silu = false}));
}

torch::Tensor BaseConv::run(const torch::Tensor& x, torch::Tensor* cache) { return conv(x, cache) * projection(x) + x; }

torch::Tensor BaseConv::forward(const torch::Tensor& x) { return run(x, nullptr); }

torch::Tensor BaseConv::step(const torch::Tensor& x, MixerState& state) {
  return run(x.unsqueeze(1), &state.conv).squeeze(1);
}

}  // namespace fwlab

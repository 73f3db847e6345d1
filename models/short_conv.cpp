#include "models/short_conv.h"

#include <cmath>

#include "kernels/short_conv/causal_conv_cpu.h"
#include "models/mixer.h"

namespace fwlab {

ShortConvImpl::ShortConvImpl(int64_t channels, int64_t taps, ShortConvOptions options)
    : taps(taps), silu_(options.silu) {
  // torch.nn.Conv1d's initialisation (fla's ShortConvolution and Zoology's subclass or wrap Conv1d; whether fla's
  // models re-initialise it was not checked): U(-1/√fan_in, 1/√fan_in), fan_in = taps for a depthwise filter, the
  // bias likewise.
  weight = register_parameter("weight", torch::empty({channels, 1, taps}));
  if (options.bias) bias = register_parameter("bias", torch::empty({channels}));
  if (SkipInitialisation::active()) return;
  torch::NoGradGuard guard;
  const double bound = 1.0 / std::sqrt(static_cast<double>(taps));
  weight.uniform_(-bound, bound);
  if (bias.defined()) bias.uniform_(-bound, bound);
}

torch::Tensor ShortConvImpl::forward(const torch::Tensor& x, torch::Tensor* cache) {
  if (!cache && kernels::causal_conv_cpu_applies(x)) return kernels::causal_conv_cpu(x, weight, bias, silu_);
  const int64_t B = x.size(0), C = x.size(2), T = x.size(1);
  auto past = cache && cache->defined() ? *cache : torch::zeros({B, C, taps - 1}, x.options());
  auto padded = torch::cat({past.to(x.scalar_type()), x.transpose(1, 2)}, 2);  // [B, C, taps - 1 + T]
  if (cache) *cache = padded.narrow(2, T, taps - 1).contiguous();
  const auto b = bias.defined() ? bias.to(x.scalar_type()) : torch::Tensor();
  auto y = torch::conv1d(padded, weight.to(x.scalar_type()), b, torch::IntArrayRef{1}, torch::IntArrayRef{0},
                         torch::IntArrayRef{1},
                         C);  // [B, C, T]
  return activate(y).transpose(1, 2);
}

torch::Tensor ShortConvImpl::reference(const torch::Tensor& x) const {
  const int64_t T = x.size(1);
  auto y = bias.defined() ? bias.expand_as(x).clone() : torch::zeros_like(x);
  for (int64_t j = 0; j < taps; ++j) {
    const int64_t shift = taps - 1 - j;  // tap j reads the input `shift` tokens back
    if (shift >= T) continue;
    auto w = weight.select(1, 0).select(1, j);  // [C]
    y.narrow(1, shift, T - shift).add_(x.narrow(1, 0, T - shift) * w);
  }
  return activate(y);
}

}  // namespace fwlab

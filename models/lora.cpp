#include "models/lora.h"

#include <cmath>

namespace fwlab {

LoraAdapterImpl::LoraAdapterImpl(int64_t parts, int64_t in, int64_t out, int64_t rank, double scale_) : scale(scale_) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  a = register_parameter("a", torch::empty({parts, rank, in}).uniform_(-bound, bound));
  b = register_parameter("b", torch::zeros({parts, out, rank}));
}

torch::Tensor LoraAdapterImpl::forward(const torch::Tensor& x) const {
  auto h = torch::einsum("...i,pri->...pr", {x, a});
  auto y = torch::einsum("...pr,por->...po", {h, b}) * scale;
  return y.flatten(-2);
}

torch::Tensor LoraAdapterImpl::delta() const { return (torch::matmul(b, a) * scale).flatten(0, 1); }

torch::Tensor with_lora(torch::nn::Linear& base, const LoraAdapter& lora, const torch::Tensor& x) {
  return lora ? base(x) + lora->forward(x) : base(x);
}

}  // namespace fwlab

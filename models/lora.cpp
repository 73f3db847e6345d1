#include "models/lora.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/few_rows_linear.h"

namespace fwlab {

LoraAdapterImpl::LoraAdapterImpl(const std::vector<int64_t>& outs, int64_t in, int64_t rank, double scale_)
    : scale(scale_),
      outs_(outs),
      equal_parts_(std::adjacent_find(outs.begin(), outs.end(), std::not_equal_to<>()) == outs.end()) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  const auto parts = static_cast<int64_t>(outs.size());
  a = register_parameter("a", torch::empty({parts, rank, in}).uniform_(-bound, bound));
  const int64_t total = std::accumulate(outs.begin(), outs.end(), int64_t{0});
  b = register_parameter("b", equal_parts_ ? torch::zeros({parts, outs.front(), rank}) : torch::zeros({total, rank}));
}

torch::Tensor LoraAdapterImpl::b_part(size_t p) const {
  if (equal_parts_) return b[static_cast<int64_t>(p)];
  const int64_t offset = std::accumulate(outs_.begin(), outs_.begin() + static_cast<std::ptrdiff_t>(p), int64_t{0});
  return b.narrow(0, offset, outs_[p]);
}

torch::Tensor LoraAdapterImpl::forward(const torch::Tensor& x) const {
  auto h = torch::einsum("...i,pri->...pr", {x, a});
  if (equal_parts_) return (torch::einsum("...pr,por->...po", {h, b}) * scale).flatten(-2);
  std::vector<torch::Tensor> ys;
  for (size_t p = 0; p < outs_.size(); ++p)
    ys.push_back(torch::matmul(h.select(-2, static_cast<int64_t>(p)), b_part(p).t()));
  return torch::cat(ys, -1) * scale;
}

torch::Tensor LoraAdapterImpl::delta() const {
  std::vector<torch::Tensor> rows;
  for (size_t p = 0; p < outs_.size(); ++p) rows.push_back(torch::matmul(b_part(p), a[static_cast<int64_t>(p)]));
  return torch::cat(rows, 0) * scale;
}

torch::Tensor with_lora(torch::nn::Linear& base, const LoraAdapter& lora, const torch::Tensor& x) {
  const auto y = kernels::few_rows_linear(x, base->weight, base->bias);  // base(x); a decode token's own loop
  return lora ? y + lora->forward(x) : y;
}

}  // namespace fwlab

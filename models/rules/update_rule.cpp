// Helpers every update rule shares (models/rules/update_rule.h).
#include "models/rules/update_rule.h"

namespace fwlab {

torch::Tensor split_heads(const torch::Tensor& x, int64_t n_heads) {
  return x.view({x.size(0), x.size(1), n_heads, -1}).transpose(1, 2);
}

void uniform_gate_init(torch::Tensor& bias, double gate_init) {
  torch::NoGradGuard guard;
  if (gate_init > 0) {
    bias.fill_(std::log(gate_init) - std::log1p(-gate_init));
    return;
  }
  const double n = static_cast<double>(bias.numel());
  const double lo = n > 2 ? 1.0 / n : 0.25, hi = 1.0 - lo;
  auto u = torch::empty_like(bias).uniform_(lo, hi);
  bias.copy_(torch::log(u) - torch::log1p(-u));
}

}  // namespace fwlab

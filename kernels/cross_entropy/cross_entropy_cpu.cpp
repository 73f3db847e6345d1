#include "kernels/cross_entropy/cross_entropy_cpu.h"

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kernels/elementwise/exp_approx.h"

namespace fwlab::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The row's largest logit, in 16 lanes (a loop the compiler vectorises; one running maximum it does not), and
// whether every logit is finite (a lane's sum of l * 0 turns NaN at an infinite or NaN logit).
template <typename T>
FWLAB_HOT T row_max(const T* __restrict l, int64_t V, bool& finite) {
  T top[16], probe[16] = {};
  for (int k = 0; k < 16; ++k) top[k] = -INFINITY;
  int64_t j = 0;
  for (; j + 16 <= V; j += 16)
    for (int k = 0; k < 16; ++k) top[k] = l[j + k] > top[k] ? l[j + k] : top[k], probe[k] += l[j + k] * T(0);
  T best = -INFINITY, sum = 0;
  for (; j < V; ++j) best = l[j] > best ? l[j] : best, sum += l[j] * T(0);
  for (int k = 0; k < 16; ++k) best = top[k] > best ? top[k] : best, sum += probe[k];
  finite = sum == T(0);
  return best;
}

// One row: returns log sum_j e^{l_j} - l_target and leaves (softmax - one-hot) * inv_n in g; NaN where a logit is
// not finite (the trainer's divergence check reads the loss before any backward).
template <typename T>
FWLAB_VECTOR_CLONES T row_loss(const T* __restrict l, T* __restrict g, int64_t V, int64_t target, T inv_n) {
  bool finite = true;
  const T top = row_max(l, V, finite);
  if (!finite) {
    for (int64_t i = 0; i < V; ++i) g[i] = T(NAN);
    return T(NAN);
  }
  T lanes[16] = {};
  int64_t j = 0;
  for (; j + 16 <= V; j += 16)
    for (int k = 0; k < 16; ++k) lanes[k] += (g[j + k] = vector_exp(l[j + k] - top));
  T sum = 0;
  for (; j < V; ++j) sum += (g[j] = vector_exp(l[j] - top));
  for (int k = 0; k < 16; ++k) sum += lanes[k];
  const T scale = inv_n / sum;
  for (int64_t i = 0; i < V; ++i) g[i] *= scale;
  g[target] -= inv_n;
  return std::log(sum) + top - l[target];
}

struct CrossEntropyMean : public torch::autograd::Function<CrossEntropyMean> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& logits_in, const torch::Tensor& targets) {
    const auto logits = logits_in.contiguous();
    const auto t = targets.to(torch::kLong).contiguous();
    const int64_t N = logits.size(0), V = logits.size(1);
    auto grad = torch::empty_like(logits);
    auto losses = torch::empty({N}, logits.options().dtype(torch::kDouble));
    const auto* pt = t.data_ptr<int64_t>();
    for (int64_t i = 0; i < N; ++i)
      TORCH_CHECK(pt[i] >= 0 && pt[i] < V,
                  fmt::format("cross_entropy_mean: target {} of row {} is no class of {}", pt[i], i, V));
    AT_DISPATCH_FLOATING_TYPES(logits.scalar_type(), "cross_entropy_mean", [&] {
      const auto* pl = logits.data_ptr<scalar_t>();
      auto* pg = grad.data_ptr<scalar_t>();
      auto* out = losses.data_ptr<double>();
      const auto inv_n = scalar_t(1) / static_cast<scalar_t>(N);
      at::parallel_for(0, N, 8, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) out[r] = row_loss(pl + r * V, pg + r * V, V, pt[r], inv_n);
      });
    });
    ctx->save_for_backward({grad});
    return {(losses.sum() / static_cast<double>(N)).to(logits.scalar_type())};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto grad = ctx->get_saved_variables()[0];
    // A loss backpropagated as it is (the usual case) takes the kept gradient without another pass over N x V.
    if (grads[0].numel() == 1 && grads[0].item<double>() == 1.0) return {grad, torch::Tensor()};
    return {grad * grads[0], torch::Tensor()};
  }
};

}  // namespace

float cross_entropy_row(const float* l, float* g, int64_t V, int64_t target, float inv_n) {
  return row_loss(l, g, V, target, inv_n);
}
double cross_entropy_row(const double* l, double* g, int64_t V, int64_t target, double inv_n) {
  return row_loss(l, g, V, target, inv_n);
}

bool cross_entropy_loop_applies(const torch::Tensor& logits) {
  const auto dtype = logits.scalar_type();
  return logits.device().is_cpu() && logits.dim() == 2 && logits.size(0) > 0 &&
         (dtype == torch::kFloat || dtype == torch::kDouble) && !at::autocast::is_cpu_enabled();
}

torch::Tensor cross_entropy_mean(const torch::Tensor& logits, const torch::Tensor& targets) {
  if (!cross_entropy_loop_applies(logits)) return torch::nn::functional::cross_entropy(logits, targets);
  return CrossEntropyMean::apply(logits, targets)[0];
}

}  // namespace fwlab::kernels

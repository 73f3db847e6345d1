#include "kernels/elementwise/gelu_tanh.h"

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>

#include <cmath>

#include "kernels/elementwise/exp_approx.h"

namespace fwlab::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr double kSqrt2OverPi = 0.7978845608028654, kCubic = 0.044715;

// y = x s, s = sigmoid(2 z): s is kept for the backward.
template <typename T>
FWLAB_VECTOR_CLONES void gelu_forward_loop(const T* __restrict x, T* __restrict y, T* __restrict s, int64_t n) {
  const T a = T(2 * kSqrt2OverPi), b = T(2 * kSqrt2OverPi * kCubic);
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i], sig = T(1) / (T(1) + vector_exp(-(a * v + b * v * v * v)));
    s[i] = sig, y[i] = v * sig;
  }
}

// dx = dy (s + x s (1 - s) 2 z'),  2 z' = 2 sqrt(2 / pi) (1 + 3 * 0.044715 x^2).
template <typename T>
FWLAB_VECTOR_CLONES void gelu_backward_loop(const T* __restrict dy, const T* __restrict x, const T* __restrict s,
                                            T* __restrict dx, int64_t n) {
  const T a = T(2 * kSqrt2OverPi), b = T(2 * kSqrt2OverPi * 3 * kCubic);
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i], sig = s[i];
    dx[i] = dy[i] * (sig + v * sig * (T(1) - sig) * (a + b * v * v));
  }
}

// Elementwise over libtorch's threads, in pieces of at least 32k elements (below that a fork costs more).
template <typename F>
void in_pieces(int64_t n, const F& body) {
  at::parallel_for(0, n, 32768, [&](int64_t begin, int64_t end) { body(begin, end - begin); });
}

struct GeluTanh : public torch::autograd::Function<GeluTanh> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x_in) {
    const auto x = x_in.contiguous();
    auto y = torch::empty_like(x), s = torch::empty_like(x);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "gelu_tanh", [&] {
      const auto* px = x.data_ptr<scalar_t>();
      auto *py = y.data_ptr<scalar_t>(), *ps = s.data_ptr<scalar_t>();
      in_pieces(x.numel(), [&](int64_t at, int64_t n) { gelu_forward_loop(px + at, py + at, ps + at, n); });
    });
    ctx->save_for_backward({x, s});
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &s = saved[1], dy = grads[0].contiguous();
    auto dx = torch::empty_like(x);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "gelu_tanh_backward", [&] {
      const auto *pdy = dy.data_ptr<scalar_t>(), *px = x.data_ptr<scalar_t>(), *ps = s.data_ptr<scalar_t>();
      auto* pdx = dx.data_ptr<scalar_t>();
      in_pieces(x.numel(), [&](int64_t at, int64_t n) { gelu_backward_loop(pdy + at, px + at, ps + at, pdx + at, n); });
    });
    return {dx};
  }
};

}  // namespace

bool gelu_tanh_loop_applies(const torch::Tensor& x) {
  const auto dtype = x.scalar_type();
  return x.device().is_cpu() && (dtype == torch::kFloat || dtype == torch::kDouble) && !at::autocast::is_cpu_enabled();
}

torch::Tensor gelu_tanh(const torch::Tensor& x) {
  if (!gelu_tanh_loop_applies(x)) return torch::gelu(x, "tanh");
  return GeluTanh::apply(x)[0];
}

}  // namespace fwlab::kernels

#include "kernels/short_conv/causal_conv_cpu.h"

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>

#include <cmath>
#include <vector>

#include "kernels/elementwise/exp_approx.h"

namespace fwlab::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct ConvShape {
  int64_t T, C, K;
};

// One sequence: u_t = b + sum_j w[j] * x_{t-K+1+j} (w as [K, C]), y = SiLU(u) where `silu` (else y is u).
template <typename T>
FWLAB_VECTOR_CLONES void conv_forward_seq(const T* __restrict x, const T* __restrict w, const T* __restrict b,
                                          T* __restrict u, T* __restrict y, ConvShape s, bool silu) {
  for (int64_t t = 0; t < s.T; ++t) {
    T* __restrict ut = u + t * s.C;
    for (int64_t c = 0; c < s.C; ++c) ut[c] = b ? b[c] : T(0);
    for (int64_t j = 0; j < s.K; ++j) {
      const int64_t from = t - s.K + 1 + j;
      if (from < 0) continue;
      const T* __restrict xs = x + from * s.C;
      const T* __restrict wj = w + j * s.C;
      for (int64_t c = 0; c < s.C; ++c) ut[c] += wj[c] * xs[c];
    }
    if (!silu) continue;
    T* __restrict yt = y + t * s.C;
    for (int64_t c = 0; c < s.C; ++c) yt[c] = ut[c] / (T(1) + vector_exp(-ut[c]));
  }
}

// One sequence's gradients: du = dy SiLU'(u) (into `du`; without SiLU du is dy itself), dx_s = sum_j w[j]
// du_{s+K-1-j}, and this sequence's share of dw [K, C] and db [C] (added).
template <typename T>
FWLAB_VECTOR_CLONES void conv_backward_seq(const T* __restrict x, const T* __restrict w, const T* __restrict u,
                                           const T* __restrict dy, T* __restrict du_buf, T* __restrict dx,
                                           T* __restrict dw, T* __restrict db, ConvShape s, bool silu) {
  const int64_t n = s.T * s.C;
  if (silu)
    for (int64_t i = 0; i < n; ++i) {
      const T sig = T(1) / (T(1) + vector_exp(-u[i]));
      du_buf[i] = dy[i] * sig * (T(1) + u[i] * (T(1) - sig));
    }
  const T* __restrict du = silu ? du_buf : dy;
  for (int64_t i = 0; i < n; ++i) dx[i] = T(0);
  for (int64_t t = 0; t < s.T; ++t) {
    const T* __restrict dut = du + t * s.C;
    for (int64_t c = 0; c < s.C; ++c) db[c] += dut[c];
    for (int64_t j = 0; j < s.K; ++j) {
      const int64_t from = t - s.K + 1 + j;
      if (from < 0) continue;
      const T* __restrict xs = x + from * s.C;
      const T* __restrict wj = w + j * s.C;
      T* __restrict dxs = dx + from * s.C;
      T* __restrict dwj = dw + j * s.C;
      for (int64_t c = 0; c < s.C; ++c) dxs[c] += wj[c] * dut[c], dwj[c] += dut[c] * xs[c];
    }
  }
}

// The sequences over libtorch's threads, each thread summing its dw and db into a row of its own.
template <typename T>
void conv_backward(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& u, const torch::Tensor& dy,
                   torch::Tensor& dx, torch::Tensor& dw_parts, ConvShape s, bool silu) {
  const int64_t B = x.size(0), seq = s.T * s.C, part = (s.K + 1) * s.C;
  std::vector<T> du(static_cast<size_t>(silu ? seq * at::get_num_threads() : 0));  // a sequence's du per thread
  at::parallel_for(0, B, 1, [&](int64_t b0, int64_t b1) {
    T* mine = dw_parts.data_ptr<T>() + at::get_thread_num() * part;
    T* du_buf = silu ? du.data() + at::get_thread_num() * seq : nullptr;
    for (int64_t b = b0; b < b1; ++b)
      conv_backward_seq(x.data_ptr<T>() + b * seq, w.data_ptr<T>(), u.data_ptr<T>() + b * seq,
                        dy.data_ptr<T>() + b * seq, du_buf, dx.data_ptr<T>() + b * seq, mine, mine + s.K * s.C, s,
                        silu);
  });
}

struct CausalConv : public torch::autograd::Function<CausalConv> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x_in, const torch::Tensor& weight,
                               const torch::Tensor& bias, bool silu) {
    const auto x = x_in.contiguous();
    const ConvShape s{x.size(1), x.size(2), weight.size(2)};
    const auto w = weight.reshape({s.C, s.K}).t().contiguous();  // [K, C]: a tap's weights side by side
    auto u = torch::empty_like(x), y = silu ? torch::empty_like(x) : u;
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "causal_conv_cpu", [&] {
      const auto* b = bias.numel() ? bias.contiguous().data_ptr<scalar_t>() : nullptr;
      at::parallel_for(0, x.size(0), 1, [&](int64_t b0, int64_t b1) {
        for (int64_t i = b0; i < b1; ++i)
          conv_forward_seq(x.data_ptr<scalar_t>() + i * s.T * s.C, w.data_ptr<scalar_t>(), b,
                           u.data_ptr<scalar_t>() + i * s.T * s.C, y.data_ptr<scalar_t>() + i * s.T * s.C, s, silu);
      });
    });
    ctx->save_for_backward({x, w, u});
    ctx->saved_data["silu"] = silu;
    ctx->saved_data["bias"] = bias.numel() > 0;
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &w = saved[1], &u = saved[2];
    const ConvShape s{x.size(1), x.size(2), w.size(0)};
    const auto dy = grads[0].contiguous();
    auto dx = torch::empty_like(x);
    auto parts = torch::zeros({at::get_num_threads(), s.K + 1, s.C}, x.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "causal_conv_cpu_backward", [&] {
      conv_backward<scalar_t>(x, w, u, dy, dx, parts, s, ctx->saved_data["silu"].toBool());
    });
    const auto summed = parts.sum(0);  // [K + 1, C]
    auto dweight = summed.narrow(0, 0, s.K).t().reshape({s.C, 1, s.K});
    auto dbias = ctx->saved_data["bias"].toBool() ? summed[s.K] : torch::Tensor();
    return {dx, dweight, dbias, torch::Tensor()};
  }
};

}  // namespace

bool causal_conv_cpu_applies(const torch::Tensor& x) {
  const auto dtype = x.scalar_type();
  return x.device().is_cpu() && (dtype == torch::kFloat || dtype == torch::kDouble) && !at::autocast::is_cpu_enabled();
}

torch::Tensor causal_conv_cpu(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                              bool silu) {
  TORCH_CHECK(causal_conv_cpu_applies(x), "causal_conv_cpu: a float32 or float64 CPU tensor outside autocast");
  const auto w = weight.to(x.scalar_type());
  // No bias as an empty tensor: an undefined one is no input libtorch 1.13's Function::apply takes.
  const auto b = bias.defined() ? bias.to(x.scalar_type()) : torch::empty({0}, x.options());
  return CausalConv::apply(x, w, b, silu)[0];
}

}  // namespace fwlab::kernels

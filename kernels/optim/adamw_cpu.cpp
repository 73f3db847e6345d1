#include "kernels/optim/adamw_cpu.h"

#include <cmath>

#include "kernels/common/lane_dot.h"

namespace fwlab::kernels {
namespace {

// The twin's arithmetic in T: libtorch's CPU kernels turn a double scalar into the tensor's type first.
template <typename T>
FWLAB_VECTOR_CLONES void adamw_loop(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, int64_t n,
                                    const AdamWStep& s) {
  const T decay = T(s.decay_factor), b1 = T(s.beta1), c1 = T(1.0 - s.beta1), b2 = T(s.beta2), c2 = T(1.0 - s.beta2);
  const T bc2 = T(s.bias_correction2), eps = T(s.eps), step = T(-s.lr / s.bias_correction1);
  for (int64_t i = 0; i < n; ++i) {
    const T gi = g[i];
    const T mi = m[i] * b1 + gi * c1, vi = v[i] * b2 + gi * gi * c2;
    m[i] = mi, v[i] = vi;
    p[i] = p[i] * decay + step * (mi / (std::sqrt(vi / bc2) + eps));
  }
}

template <typename T>
FWLAB_VECTOR_CLONES void scale_loop(T* __restrict g, int64_t n, T factor) {
  for (int64_t i = 0; i < n; ++i) g[i] *= factor;
}

template <typename T>
FWLAB_VECTOR_CLONES double sum_of_squares(const T* x, int64_t n) {
  return static_cast<double>(lane_dot(x, x, n));
}

bool fits(const torch::Tensor& t) {
  const auto dtype = t.scalar_type();
  return t.defined() && t.device().is_cpu() && t.is_contiguous() && (dtype == torch::kFloat || dtype == torch::kDouble);
}

}  // namespace

bool adamw_loop_applies(const torch::Tensor& param, const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq) {
  const auto& g = param.grad();
  return fits(param) && fits(g) && fits(exp_avg) && fits(exp_avg_sq) && g.scalar_type() == param.scalar_type() &&
         exp_avg.scalar_type() == param.scalar_type() && exp_avg_sq.scalar_type() == param.scalar_type();
}

void adamw_update_cpu(torch::Tensor& param, torch::Tensor& exp_avg, torch::Tensor& exp_avg_sq, const AdamWStep& s) {
  TORCH_CHECK(adamw_loop_applies(param, exp_avg, exp_avg_sq), "adamw_update_cpu: CPU float tensors, contiguous");
  AT_DISPATCH_FLOATING_TYPES(param.scalar_type(), "adamw_update_cpu", [&] {
    adamw_loop(param.data_ptr<scalar_t>(), param.grad().data_ptr<scalar_t>(), exp_avg.data_ptr<scalar_t>(),
               exp_avg_sq.data_ptr<scalar_t>(), param.numel(), s);
  });
  // Written through raw pointers: the versions say so, as an in-place op's would (what keeps a copy of the
  // weights, such as models/fused_projection.h, reads them).
  for (auto* t : {&param, &exp_avg, &exp_avg_sq}) t->unsafeGetTensorImpl()->bump_version();
}

bool grads_fit_clip_loop(const std::vector<torch::Tensor>& params) {
  for (const auto& p : params)
    if (p.grad().defined() && !fits(p.grad())) return false;
  return true;
}

double clip_grad_norm_cpu(const std::vector<torch::Tensor>& params, double max_norm) {
  TORCH_CHECK(grads_fit_clip_loop(params), "clip_grad_norm_cpu: CPU float gradients, contiguous");
  double squares = 0.0;
  for (const auto& p : params) {
    const auto& g = p.grad();
    if (!g.defined()) continue;
    AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "clip_grad_norm_cpu",
                               [&] { squares += sum_of_squares(g.data_ptr<scalar_t>(), g.numel()); });
  }
  const double norm = std::sqrt(squares), factor = std::min(1.0, max_norm / (norm + 1e-6));
  for (const auto& p : params) {
    auto g = p.grad();
    if (!g.defined()) continue;
    AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "clip_grad_norm_cpu_scale",
                               [&] { scale_loop(g.data_ptr<scalar_t>(), g.numel(), static_cast<scalar_t>(factor)); });
  }
  return norm;
}

}  // namespace fwlab::kernels

// kernels/common/recurrent_step.h. Compiled with the CUDA binding's definitions (kernels/CMakeLists.txt): with
// FWLAB_HAVE_CUDA the step kernel's launch, without it libtorch's step forms alone.
#include "kernels/common/recurrent_step.h"

#include <sstream>

#include "kernels/decay/decay.h"
#include "kernels/decay/kernel_guard.h"
#include "kernels/delta/delta.h"

#if defined(FWLAB_HAVE_CUDA)
#include "kernels/cuda/recurrent_step.h"
#include "kernels/cuda_stream.h"
#endif

namespace fwlab::kernels {

namespace {

// Every input in one dtype, contiguous: fp32 for 16-bit inputs (the state and the gates are fp32 under mixed
// precision), fp64 for fp64.
StepInputs widened(const StepInputs& in) {
  const auto wide = torch::promote_types(widened_to_fp32(in.q).scalar_type(), widened_to_fp32(in.v).scalar_type());
  auto as = [&](const torch::Tensor& t) { return t.defined() ? t.to(wide).contiguous() : t; };
  return {as(in.q), as(in.k), as(in.v), as(in.log_a), as(in.log_b), as(in.alpha), as(in.beta), as(in.state0)};
}

// y back in the caller's value dtype (the state stays wide).
RecurrenceResult y_as(const torch::Tensor& v, const RecurrenceResult& r) { return {r.y.to(v.scalar_type()), r.state}; }

torch::Tensor first_step(const torch::Tensor& t) { return t.defined() ? t.select(2, 0) : t; }

RecurrenceResult libtorch_step(const StepInputs& w) {
  const auto q = first_step(w.q), k = first_step(w.k), v = first_step(w.v);
  RecurrenceResult r;
  if (!w.beta.defined())
    r = decay_recurrence_step(q, k, v, first_step(w.log_a), first_step(w.log_b), w.state0);
  else if (w.alpha.defined())
    r = gated_delta_recurrence_step(q, k, v, first_step(w.alpha), first_step(w.beta), w.state0);
  else
    r = delta_recurrence_step(q, k, v, first_step(w.beta), w.state0);
  return {r.y.unsqueeze(2), r.state};
}

#if defined(FWLAB_HAVE_CUDA)

template <typename T>
const T* data_or_null(const torch::Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

RecurrenceResult cuda_step(const StepInputs& w) {
  const int64_t B = w.q.size(0), H = w.q.size(1), M = w.q.size(3), D = w.v.size(3);
  auto y = torch::empty({B, H, 1, D}, w.v.options()), S = torch::empty({B, H, D, M}, w.v.options());
  const CudaDeviceGuard guard(w.q.get_device());
  AT_DISPATCH_FLOATING_TYPES(w.q.scalar_type(), "recurrent_step_cuda", [&] {
    cuda::StepProblem<scalar_t> p;
    p.q = w.q.data_ptr<scalar_t>(), p.k = w.k.data_ptr<scalar_t>(), p.v = w.v.data_ptr<scalar_t>();
    p.log_a = data_or_null<scalar_t>(w.log_a), p.log_b = data_or_null<scalar_t>(w.log_b);
    p.a_width = w.log_a.defined() ? w.log_a.size(3) : 0, p.b_width = w.log_b.defined() ? w.log_b.size(3) : 0;
    p.alpha = data_or_null<scalar_t>(w.alpha), p.beta = data_or_null<scalar_t>(w.beta);
    p.state_in = data_or_null<scalar_t>(w.state0), p.state_out = S.data_ptr<scalar_t>(), p.y = y.data_ptr<scalar_t>();
    p.heads = B * H, p.D = D, p.M = M;
    const auto e = cuda::recurrent_step(p, current_cuda_stream(w.q.get_device()));
    TORCH_CHECK(e == cudaSuccess, "recurrent_step_cuda: ", cudaGetErrorString(e));
  });
  if (kernel_made_wrong(kCudaStepKernel)) y = y * 1.1;  // the test hook: a broken kernel's outputs
  return {y, S};
}

std::string step_class(const StepInputs& w) {
  std::ostringstream out;
  out << w.q.device().str() << ' ' << c10::toString(w.q.scalar_type()) << " D=" << w.v.size(3) << " M=" << w.q.size(3)
      << (w.beta.defined() ? (w.alpha.defined() ? " gated delta" : " delta")
                           : std::string(" decay a=") + (w.log_a.defined() ? std::to_string(w.log_a.size(3)) : "-") +
                                 " b=" + (w.log_b.defined() ? std::to_string(w.log_b.size(3)) : "-"));
  return out.str();
}

// The kernel against libtorch's step on the class's first inputs: y and the state, relative to their largest value.
KernelComparison compare_step(const StepInputs& w) {
  const auto fast = cuda_step(w), plain = libtorch_step(w);
  KernelComparison c;
  c.tolerance = kernel_tolerance(w.q.scalar_type());
  for (const auto& [name, a, b] : {std::tuple{"y", fast.y, plain.y}, std::tuple{"state", fast.state, plain.state}}) {
    const double error = (a - b).abs().max().item<double>() / std::max(1e-6, b.abs().max().item<double>());
    if (error >= c.max_error) c.max_error = error, c.worst = name;
  }
  return c;
}

#endif

}  // namespace

bool one_token_step_applies(const StepInputs& in) {
  return !in.q.is_cpu() && in.q.size(2) == 1 &&
         !gradients_needed({in.q, in.k, in.v, in.log_a, in.log_b, in.alpha, in.beta, in.state0});
}

RecurrenceResult one_token_step_libtorch(const StepInputs& in) { return y_as(in.v, libtorch_step(widened(in))); }

RecurrenceResult one_token_step(const StepInputs& in) {
  const auto w = widened(in);
#if defined(FWLAB_HAVE_CUDA)
  if (w.q.is_cuda() && w.q.size(3) <= 1024 &&
      kernel_verdict(kCudaStepKernel, step_class(w), [&] { return compare_step(w); }))
    return y_as(in.v, cuda_step(w));
#endif
  return y_as(in.v, libtorch_step(w));
}

}  // namespace fwlab::kernels

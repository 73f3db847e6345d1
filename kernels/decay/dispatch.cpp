// The decay recurrence a model runs, chosen by the tensors' device (kernels/decay/decay.h).
#include "kernels/common/recurrent_step.h"
#include "kernels/decay/kernel_guard.h"
#include "kernels/decay/decay.h"

namespace fwlab::kernels {

torch::Tensor widened_to_fp32(const torch::Tensor& x) {
  if (!x.defined()) return x;
  const auto t = x.scalar_type();
  return t == torch::kBFloat16 || t == torch::kFloat16 ? x.to(torch::kFloat32) : x;
}

RecurrenceResult decay_recurrence(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const torch::Tensor& log_a, const torch::Tensor& log_b, const torch::Tensor& state0,
                                  int64_t chunk) {
  // A decode token off the CPU: one step, not a chunk (kernels/common/recurrent_step.h).
  if (const StepInputs step{q, k, v, log_a, log_b, {}, {}, state0}; one_token_step_applies(step))
    return one_token_step(step);
  // A custom kernel runs only for shape classes it passed its first-use check on (kernel_guard.h).
  if (q.is_cuda() && cuda_chunks_fit(q, v) && kernel_trusted(CustomKernel::cuda_chunked, q, v, log_a, log_b))
    return custom_kernel(CustomKernel::cuda_chunked)(q, k, v, log_a, log_b, state0);
  // The CPU kernels and the libtorch form keep one dtype throughout: the widest given (fp32 for mixed precision).
  const auto wide = torch::promote_types(widened_to_fp32(q).scalar_type(), widened_to_fp32(v).scalar_type());
  auto as_wide = [&](const torch::Tensor& x) { return x.defined() && x.scalar_type() != wide ? x.to(wide) : x; };
  const auto q_ = as_wide(q), k_ = as_wide(k), v_ = as_wide(v), a_ = as_wide(log_a), b_ = as_wide(log_b),
             s_ = as_wide(state0);
  if (q.is_cpu() && kernel_trusted(CustomKernel::cpu_fused, q_, v_, a_, b_))
    return custom_kernel(CustomKernel::cpu_fused)(q_, k_, v_, a_, b_, s_);
  return decay_recurrence_chunked(q_, k_, v_, a_, b_, s_, chunk);
}

}  // namespace fwlab::kernels

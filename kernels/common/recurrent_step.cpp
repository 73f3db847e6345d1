// kernels/common/recurrent_step.h. Compiled with the CUDA binding's definitions (kernels/CMakeLists.txt): with
// FWLAB_HAVE_CUDA the step kernel's launch, without it libtorch's step forms alone.
#include "kernels/common/recurrent_step.h"

#include <ATen/CPUGeneratorImpl.h>

#include <limits>
#include <sstream>

#include "kernels/decay/decay.h"
#include "kernels/decay/kernel_check.h"
#include "kernels/decay/kernel_guard.h"
#include "kernels/delta/delta.h"

#if defined(FWLAB_HAVE_CUDA)
#include "kernels/cuda/recurrent_step.h"
#include "kernels/cuda_stream.h"
#endif

namespace fwlab::kernels {

namespace {

// The shapes the kernel reads by index, checked here so that a wrong one is an error rather than a stray read.
void check_shapes(const StepInputs& in) {
  TORCH_CHECK(in.q.dim() == 4 && in.v.dim() == 4, "one_token_step: q, k [B, H, 1, M] and v [B, H, 1, D]");
  const int64_t B = in.q.size(0), H = in.q.size(1), M = in.q.size(3), D = in.v.size(3);
  TORCH_CHECK(
      in.q.size(2) == 1 && in.k.sizes() == in.q.sizes() && in.v.size(0) == B && in.v.size(1) == H && in.v.size(2) == 1,
      "one_token_step: q, k [B, H, 1, M] and v [B, H, 1, D]");
  for (const auto* t : {&in.k, &in.v, &in.log_a, &in.log_b, &in.alpha, &in.beta, &in.state0})
    TORCH_CHECK(!t->defined() || t->device() == in.q.device(), "one_token_step: every input on q's device");
  auto width_ok = [&](const torch::Tensor& t, int64_t full) {
    return !t.defined() || (t.dim() == 4 && t.size(0) == B && t.size(1) == H && t.size(2) == 1 &&
                            (t.size(3) == 1 || t.size(3) == full));
  };
  TORCH_CHECK(width_ok(in.log_a, D) && width_ok(in.log_b, M) && width_ok(in.alpha, 1) && width_ok(in.beta, 1),
              "one_token_step: log_a [B, H, 1, 1 or D], log_b [B, H, 1, 1 or M], alpha and beta [B, H, 1, 1]");
  const std::vector<int64_t> state_sizes{B, H, D, M};
  TORCH_CHECK(!in.state0.defined() || in.state0.sizes() == state_sizes, "one_token_step: the state is [B, H, D, M]");
}

// Every input in one dtype, contiguous: fp32 for 16-bit inputs (the state and the gates are fp32 under mixed
// precision), fp64 for fp64.
StepInputs widened(const StepInputs& in) {
  const auto wide = torch::promote_types(widened_to_fp32(in.q).scalar_type(), widened_to_fp32(in.v).scalar_type());
  auto as = [&](const torch::Tensor& t) { return t.defined() ? t.to(wide).contiguous() : t; };
  return {as(in.q), as(in.k), as(in.v), as(in.log_a), as(in.log_b), as(in.alpha), as(in.beta), as(in.state0)};
}

// y in q's and v's common dtype, as the CPU's and libtorch's parallel forms give it (fp32 where an attention
// normaliser widened q; the chunked CUDA kernel gives q's, the same but for a bf16 q with an fp32 v); the state
// stays wide.
RecurrenceResult y_as(const StepInputs& in, const RecurrenceResult& r) {
  return {r.y.to(torch::promote_types(in.q.scalar_type(), in.v.scalar_type())), r.state};
}

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
  auto width = [](const torch::Tensor& t) { return t.defined() ? std::to_string(t.size(3)) : std::string("-"); };
  std::ostringstream out;
  out << w.q.device().str() << ' ' << c10::toString(w.q.scalar_type()) << " D=" << w.v.size(3) << " M=" << w.q.size(3)
      << (w.beta.defined() ? (w.alpha.defined() ? " gated delta" : " delta")
                           : " decay a=" + width(w.log_a) + " b=" + width(w.log_b));
  return out.str();
}

// Inputs of w's class from a private generator (the caller's random stream stays as it was): one batch row, gates
// in their ranges and a state, so that the kernel's reads of S are checked, not only a first token's v kᵀ.
StepInputs class_case(const StepInputs& w) {
  auto gen = at::detail::createCPUGenerator(20241128);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  auto draw = [&](const torch::Tensor& like) {
    auto sizes = like.sizes().vec();
    sizes[0] = 1;
    return torch::randn(sizes, gen, f64);
  };
  const double scale = 1.0 / std::sqrt(static_cast<double>(w.q.size(3)));
  StepInputs c{draw(w.q) * scale, draw(w.k) * scale, draw(w.v), {}, {}, {}, {}, {}};
  if (w.log_a.defined()) c.log_a = torch::log_sigmoid(draw(w.log_a) + 1.0);
  if (w.log_b.defined()) c.log_b = torch::log_sigmoid(draw(w.log_b) + 1.0);
  if (w.alpha.defined()) c.alpha = torch::sigmoid(draw(w.alpha) + 2.0);
  if (w.beta.defined()) c.beta = torch::sigmoid(draw(w.beta));
  c.state0 = torch::randn({1, w.q.size(1), w.v.size(3), w.q.size(3)}, gen, f64);
  auto to = [&](torch::Tensor& t) {
    if (t.defined()) t = t.to(w.q.device(), w.q.scalar_type()).contiguous();
  };
  for (auto* t : {&c.q, &c.k, &c.v, &c.log_a, &c.log_b, &c.alpha, &c.beta, &c.state0}) to(*t);
  return c;
}

// The kernel against libtorch's step on such inputs, from their state and from none (a decode's first token),
// outside the caller's autocast and inference mode. A launch that fails (no kernel image for this GPU, say; or a
// passing shortage of memory, which then costs the class the kernel for the process) is a failed check, so the
// class falls back instead of stopping.
KernelComparison compare_step(const StepInputs& w) {
  const c10::InferenceMode not_inference(false);
  const torch::NoGradGuard no_grad;
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  KernelComparison out;
  out.tolerance = kernel_tolerance(w.q.scalar_type());
  try {
    auto with_state = class_case(w), without = with_state;
    without.state0 = torch::Tensor();
    for (const auto* c : {&with_state, &without}) {
      const auto fast = cuda_step(*c), plain = libtorch_step(*c);
      for (const auto& [name, a, b] :
           {std::tuple{"y", fast.y, plain.y}, std::tuple{"state", fast.state, plain.state}}) {
        const double gap = relative_gap(a, b);
        if (!(gap <= out.max_error)) out.max_error = gap, out.worst = name;  // NaN and inf count as the worst
      }
    }
  } catch (const std::exception& e) {
    out.max_error = std::numeric_limits<double>::infinity(), out.worst = std::string("the launch: ") + e.what();
  }
  return out;
}

#endif

}  // namespace

bool one_token_step_applies(const StepInputs& in) {
  return !in.q.is_cpu() && in.q.size(2) == 1 &&
         !gradients_needed({in.q, in.k, in.v, in.log_a, in.log_b, in.alpha, in.beta, in.state0});
}

RecurrenceResult one_token_step_libtorch(const StepInputs& in) {
  check_shapes(in);
  return y_as(in, libtorch_step(widened(in)));
}

RecurrenceResult one_token_step(const StepInputs& in) {
  check_shapes(in);
  const auto w = widened(in);
#if defined(FWLAB_HAVE_CUDA)
  if (w.q.is_cuda() && w.q.size(3) <= cuda::kStepMaxM &&
      kernel_verdict(kCudaStepKernel, step_class(w), w.q, [&] { return compare_step(w); }))
    return y_as(in, cuda_step(w));
#endif
  return y_as(in, libtorch_step(w));
}

}  // namespace fwlab::kernels

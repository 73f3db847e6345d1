// The delta family's CUDA kernel's first-use check (kernels/delta/cuda_guard.h).
#include "kernels/delta/cuda_guard.h"

#include <ATen/CPUGeneratorImpl.h>

#include <limits>
#include <sstream>

#include "kernels/decay/kernel_guard.h"
#include "kernels/delta/delta.h"

namespace fwlab::kernels {

namespace {

std::string delta_class(const torch::Tensor& q, const torch::Tensor& v, const torch::Tensor& alpha) {
  std::ostringstream out;
  out << q.device().str() << ' ' << c10::toString(q.scalar_type()) << (alpha.defined() ? " gated delta" : " delta")
      << " D=" << v.size(3) << " M=" << q.size(3);
  return out.str();
}

// Inputs of the class from a private generator (the caller's random stream stays as it was): one sequence of 80 steps
// (a chunk edge and padding), two heads, unit keys and queries, gates in their ranges, a state; leaves that need
// gradients, in the class's dtype (gates and state in the accumulation type).
std::vector<torch::Tensor> class_case(const torch::Tensor& q, const torch::Tensor& v, bool gated) {
  auto gen = at::detail::createCPUGenerator(20261128);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  const int64_t T = 80, M = q.size(3), D = v.size(3);
  namespace F = torch::nn::functional;
  auto unit = [&] { return F::normalize(torch::randn({1, 2, T, M}, gen, f64), F::NormalizeFuncOptions().dim(-1)); };
  const auto wide = q.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  std::vector<torch::Tensor> in{unit(), unit(), torch::randn({1, 2, T, D}, gen, f64),
                                gated ? torch::sigmoid(torch::randn({1, 2, T, 1}, gen, f64) + 2) : torch::Tensor(),
                                torch::sigmoid(torch::randn({1, 2, T, 1}, gen, f64)),
                                torch::randn({1, 2, D, M}, gen, f64)};
  for (size_t n = 0; n < in.size(); ++n)
    if (in[n].defined()) in[n] = in[n].to(q.device(), n < 3 ? q.scalar_type() : wide).requires_grad_(true);
  return in;
}

// y, the final state and every input's gradient (alpha's as log alpha's: d alpha * alpha) of one form.
std::vector<torch::Tensor> outcome(const std::vector<torch::Tensor>& in, const RecurrenceResult& r) {
  const auto loss = r.y.to(torch::kFloat64).sin().sum() + r.state.to(torch::kFloat64).cos().sum();
  std::vector<torch::Tensor> leaves, out{r.y.detach(), r.state.detach()};
  for (const auto& t : in)
    if (t.defined()) leaves.push_back(t);
  auto grads = torch::autograd::grad({loss}, leaves);
  for (size_t n = 0; n < grads.size(); ++n)
    out.push_back(in[3].defined() && leaves[n].is_same(in[3]) ? grads[n] * in[3].detach() : grads[n]);
  return out;
}

KernelComparison compare_delta_kernel(const torch::Tensor& q, const torch::Tensor& v, bool gated) {
  const c10::InferenceMode not_inference(false);
  const torch::AutoGradMode grad(true);
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  KernelComparison out;
  out.tolerance = kernel_tolerance(q.scalar_type());
  try {
    const auto in = class_case(q, v, gated);
    const auto wide = in[4].scalar_type();  // the reference computes in the accumulation type, on the same values
    std::vector<torch::Tensor> ref_in;
    for (const auto& t : in) ref_in.push_back(t.defined() ? t.detach().to(wide).requires_grad_(true) : t);
    const auto fast = outcome(in, delta_cuda_kernel(in[0], in[1], in[2], in[3], in[4], in[5]));
    const auto plain = outcome(
        ref_in, gated_delta_recurrence_chunked(ref_in[0], ref_in[1], ref_in[2], ref_in[3], ref_in[4], ref_in[5], 64));
    const char* names[] = {"y", "state", "dq", "dk", "dv", "dalpha or dbeta", "dbeta or dstate0", "dstate0"};
    for (size_t n = 0; n < fast.size(); ++n)
      if (const double gap = relative_gap(fast[n], plain[n]); !(gap <= out.max_error))
        out.max_error = gap, out.worst = names[n];  // NaN and inf count as the worst
  } catch (const std::exception& e) {
    out.max_error = std::numeric_limits<double>::infinity(), out.worst = std::string("the launch: ") + e.what();
  }
  return out;
}

}  // namespace

bool delta_cuda_kernel_trusted(const torch::Tensor& q, const torch::Tensor& v, const torch::Tensor& alpha) {
  if (!q.is_cuda() || !delta_cuda_chunks_fit(q, v)) return false;
  return kernel_verdict(kDeltaChunksKernel, delta_class(q, v, alpha),
                        [&] { return compare_delta_kernel(q, v, alpha.defined()); });
}

RecurrenceResult delta_cuda_kernel(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   const torch::Tensor& alpha, const torch::Tensor& beta, const torch::Tensor& state0) {
  auto r = gated_delta_recurrence_cuda_chunked(q, k, v, alpha, beta, state0);
  if (kernel_made_wrong(kDeltaChunksKernel)) r.y = r.y * 1.1;  // the test hook: a broken kernel's outputs
  return r;
}

}  // namespace fwlab::kernels

// The delta family's CUDA kernel's first-use check (kernels/delta/cuda_guard.h).
#include "kernels/delta/cuda_guard.h"

#include <ATen/CPUGeneratorImpl.h>

#include <atomic>
#include <chrono>
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

DeltaCase class_case(const torch::Tensor& q, const torch::Tensor& v, bool gated) {
  DeltaCase c;
  c.D = v.size(3), c.M = q.size(3), c.dtype = q.scalar_type(), c.device = q.device(), c.gated = gated;
  return c;
}

// The case's inputs from a private generator (the caller's random stream stays as it was): leaves that need
// gradients, q, k, v in the case's dtype, gates and state in the accumulation type.
std::vector<torch::Tensor> case_inputs(const DeltaCase& c) {
  auto gen = at::detail::createCPUGenerator(20261128);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  namespace F = torch::nn::functional;
  auto unit = [&] {
    return F::normalize(torch::randn({c.B, c.H, c.T, c.M}, gen, f64), F::NormalizeFuncOptions().dim(-1));
  };
  auto gate = [&](double shift) { return torch::sigmoid(torch::randn({c.B, c.H, c.T, 1}, gen, f64) + shift); };
  const auto wide = c.dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  std::vector<torch::Tensor> in{unit(),
                                unit(),
                                torch::randn({c.B, c.H, c.T, c.D}, gen, f64),
                                c.gated ? gate(2.0) : torch::Tensor(),
                                gate(0.0),
                                torch::randn({c.B, c.H, c.D, c.M}, gen, f64)};
  for (size_t n = 0; n < in.size(); ++n)
    if (in[n].defined()) in[n] = in[n].to(c.device, n < 3 ? c.dtype : wide).requires_grad_(true);
  return in;
}

// y, the final state and every input's gradient (alpha's as log alpha's: d alpha * alpha) of one form, and its time.
std::vector<torch::Tensor> outcome(const std::vector<torch::Tensor>& in, const DeltaKernel& form, double& ms) {
  const auto start = std::chrono::steady_clock::now();
  const auto r = form(in[0], in[1], in[2], in[3], in[4], in[5]);
  const auto loss = r.y.to(torch::kFloat64).sin().sum() + r.state.to(torch::kFloat64).cos().sum();
  std::vector<torch::Tensor> leaves, out{r.y.detach(), r.state.detach()};
  for (const auto& t : in)
    if (t.defined()) leaves.push_back(t);
  const auto grads = torch::autograd::grad({loss}, leaves);
  if (in[0].is_cuda()) torch::cuda::synchronize(in[0].get_device());
  ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (size_t n = 0; n < grads.size(); ++n)
    out.push_back(in[3].defined() && leaves[n].is_same(in[3]) ? grads[n] * in[3].detach() : grads[n]);
  return out;
}

std::atomic<bool> host_route{false};

}  // namespace

void route_delta_to_host_kernel(bool on) { host_route = on; }
bool delta_routed_to_host_kernel() { return host_route; }

KernelComparison compare_delta_with_libtorch(const DeltaKernel& kernel, const DeltaCase& c) {
  const c10::InferenceMode not_inference(false);
  const torch::AutoGradMode grad(true);
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  KernelComparison out;
  out.tolerance = kernel_tolerance(c.dtype);
  try {
    const auto in = case_inputs(c);
    std::vector<torch::Tensor> ref_in;  // the same rounded values, in the accumulation type
    for (const auto& t : in)
      ref_in.push_back(t.defined() ? t.detach().to(in[4].scalar_type()).requires_grad_(true) : t);
    const auto fast = outcome(in, kernel, out.kernel_ms);
    const DeltaKernel reference = [](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                     const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& s) {
      return gated_delta_recurrence_chunked(q, k, v, a, b, s, 64);
    };
    const auto plain = outcome(ref_in, reference, out.reference_ms);
    std::vector<std::string> names{"y", "state", "dq", "dk", "dv", "dbeta", "dstate0"};
    if (c.gated) names.insert(names.begin() + 5, "dlog_alpha");
    for (size_t n = 0; n < fast.size(); ++n)
      if (const double gap = relative_gap(fast[n], plain[n]); !(gap <= out.max_error))
        out.max_error = gap, out.worst = names[n];  // NaN and inf count as the worst
  } catch (const c10::OutOfMemoryError&) {
    throw;  // a passing shortage, not a wrong kernel: the caller's own step would meet it too
  } catch (const std::exception& e) {
    out.max_error = std::numeric_limits<double>::infinity(), out.worst = std::string("the launch: ") + e.what();
  }
  return out;
}

bool delta_cuda_kernel_trusted(const torch::Tensor& q, const torch::Tensor& v, const torch::Tensor& alpha) {
  if (!q.is_cuda() || !delta_cuda_chunks_fit(q, v)) return false;
  return kernel_verdict(kDeltaChunksKernel, delta_class(q, v, alpha), q, [&] {
    return compare_delta_with_libtorch(delta_cuda_kernel, class_case(q, v, alpha.defined()));
  });
}

RecurrenceResult delta_cuda_kernel(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   const torch::Tensor& alpha, const torch::Tensor& beta, const torch::Tensor& state0) {
  auto r = gated_delta_recurrence_cuda_chunked(q, k, v, alpha, beta, state0);
  if (kernel_made_wrong(kDeltaChunksKernel)) r.y = r.y * 1.1;  // the test hook: a broken kernel's outputs
  return r;
}

}  // namespace fwlab::kernels

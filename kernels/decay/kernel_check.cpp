#include "kernels/decay/kernel_check.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <vector>

namespace fwlab::kernels {

namespace {

const char* const kInputNames[] = {"q", "k", "v", "log_a", "log_b", "state0"};

struct Leaves {
  torch::Tensor in[6];  // q, k, v, log_a, log_b, state0 (gates undefined where absent)
  std::vector<torch::Tensor> defined() const {
    std::vector<torch::Tensor> out;
    for (const auto& t : in)
      if (t.defined()) out.push_back(t);
    return out;
  }
};

torch::ScalarType wide_type(torch::ScalarType dtype) {
  return dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
}

// float64 values on the CPU from the case's own generator: q, k, v, log_a, log_b, state0, then dy and dS.
std::vector<torch::Tensor> case_values(const DecayCase& c) {
  auto gen = at::detail::createCPUGenerator(c.seed);
  const auto opt = torch::TensorOptions().dtype(torch::kFloat64);
  auto normal = [&](std::vector<int64_t> shape) { return at::normal(0.0, 1.0, shape, gen, opt); };
  auto gate = [&](int64_t width) { return torch::log_sigmoid(normal({c.B, c.H, c.T, width}) + 1.0) * c.strength; };
  const double key_scale = 1.0 / std::sqrt(double(c.M));
  std::vector<torch::Tensor> v{normal({c.B, c.H, c.T, c.M}) * key_scale,
                               normal({c.B, c.H, c.T, c.M}) * key_scale,
                               normal({c.B, c.H, c.T, c.D}),
                               torch::Tensor(),
                               torch::Tensor(),
                               normal({c.B, c.H, c.D, c.M})};
  if (c.value_gate == 1) v[3] = gate(1);
  if (c.value_gate == 2) v[3] = gate(c.D);
  if (c.key_gate) v[4] = gate(c.M);
  v.push_back(normal({c.B, c.H, c.T, c.D}));
  v.push_back(normal({c.B, c.H, c.D, c.M}));
  return v;
}

// Leaves on the device: q, k, v in `inputs`, gates and the state in `wide`.
Leaves leaves(const std::vector<torch::Tensor>& values, torch::Device device, torch::ScalarType inputs,
              torch::ScalarType wide) {
  Leaves l;
  for (int i = 0; i < 6; ++i)
    if (values[i].defined()) l.in[i] = values[i].to(device, i < 3 ? inputs : wide).detach().requires_grad_(true);
  return l;
}

struct Run {
  std::vector<torch::Tensor> outputs;  // y, state, then the gradients of the defined inputs
  double ms = 0;
};

Run run_once(const DecayKernel& kernel, const Leaves& l, const torch::Tensor& dy, const torch::Tensor& dS) {
  const auto start = std::chrono::steady_clock::now();
  auto r = kernel(l.in[0], l.in[1], l.in[2], l.in[3], l.in[4], l.in[5]);
  auto loss = (r.y.to(dy.scalar_type()) * dy).sum() + (r.state.to(dS.scalar_type()) * dS).sum();
  Run out{{r.y, r.state}};
  for (auto& g : torch::autograd::grad({loss}, l.defined())) out.outputs.push_back(g);
  (void)loss.item<double>();  // waits for the device: the time covers the work, not only its launch
  out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

Run best_of(const DecayKernel& kernel, const Leaves& l, const torch::Tensor& dy, const torch::Tensor& dS, int repeats) {
  Run best = run_once(kernel, l, dy, dS);
  for (int i = 1; i < repeats; ++i) best.ms = std::min(best.ms, run_once(kernel, l, dy, dS).ms);
  return best;
}

}  // namespace

double relative_gap(const torch::Tensor& a, const torch::Tensor& b) {
  const auto x = a.detach().to(torch::kCPU, torch::kFloat64), y = b.detach().to(torch::kCPU, torch::kFloat64);
  if (x.numel() == 0) return 0;
  const double gap = (x - y).abs().max().item<double>() / std::max(1e-6, y.abs().max().item<double>());
  return std::isnan(gap) ? std::numeric_limits<double>::infinity() : gap;  // inf - inf, or inf / inf
}

double kernel_tolerance(torch::ScalarType dtype) {
  if (dtype == torch::kFloat64) return 1e-9;
  if (dtype == torch::kFloat32) return 1e-4;
  return 2e-2;
}

KernelComparison compare_with_libtorch(const DecayKernel& kernel, const DecayCase& c, int repeats) {
  const c10::InferenceMode not_inference(false);  // a check may start inside a caller's no-grad or inference scope
  const torch::AutoGradMode grad_on(true);
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  const auto wide = wide_type(c.dtype);
  auto values = case_values(c);
  for (int i = 0; i < 3; ++i) values[i] = values[i].to(c.dtype).to(torch::kFloat64);  // the rounding both sides see
  const auto dy = values[6].to(c.device, wide), dS = values[7].to(c.device, wide);
  const DecayKernel reference = [](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   const torch::Tensor& a, const torch::Tensor& b,
                                   const torch::Tensor& s) { return decay_recurrence_chunked(q, k, v, a, b, s, 64); };
  const auto fast = best_of(kernel, leaves(values, c.device, c.dtype, wide), dy, dS, repeats);
  const auto slow = best_of(reference, leaves(values, c.device, wide, wide), dy, dS, repeats);
  KernelComparison out;
  out.tolerance = kernel_tolerance(c.dtype), out.kernel_ms = fast.ms, out.reference_ms = slow.ms;
  std::vector<std::string> names{"y", "state"};
  for (int i = 0; i < 6; ++i)
    if (values[i].defined()) names.push_back(std::string("d") + kInputNames[i]);
  for (size_t i = 0; i < names.size(); ++i) {
    const double gap = relative_gap(fast.outputs[i], slow.outputs[i]);
    if (!(gap <= out.max_error)) out.max_error = gap, out.worst = names[i];  // NaN and inf count as the worst
  }
  return out;
}

}  // namespace fwlab::kernels

#include "kernels/decay/kernel_guard.h"

#include "kernels/cuda_capture.h"
#include "kernels/decay/form_race.h"

#include <map>
#include <mutex>
#include <sstream>

namespace fwlab::kernels {

namespace {

struct Guard {
  std::mutex mutex;
  bool self_check = true;
  std::string wrong_kernel;
  std::function<void(const KernelFallback&)> listener;
  std::map<std::string, bool> trusted;  // shape class -> verdict
};

Guard& guard() {
  static Guard g;
  return g;
}

int value_gate_of(const torch::Tensor& log_a) { return !log_a.defined() ? 0 : log_a.size(3) == 1 ? 1 : 2; }

std::string shape_class(const torch::Tensor& q, const torch::Tensor& v, const torch::Tensor& log_a,
                        const torch::Tensor& log_b) {
  const char* value_side[] = {"none", "head", "row"};
  std::ostringstream out;
  out << q.device().str() << ' ' << c10::toString(q.scalar_type()) << " D=" << v.size(3) << " M=" << q.size(3)
      << " gates=" << value_side[value_gate_of(log_a)] << (log_b.defined() ? "+key" : "");
  return out.str();
}

RecurrenceResult run_plain(CustomKernel kernel, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           const torch::Tensor& log_a, const torch::Tensor& log_b, const torch::Tensor& state0) {
  if (kernel == CustomKernel::cuda_chunked) return decay_recurrence_cuda_chunked(q, k, v, log_a, log_b, state0);
  // The CPU's custom kernel: the fused one or the chunked one, whichever measured faster for the class.
  return decay_family_recurrence(q, k, v, log_a, log_b, state0);
}

// A kernel with the test hook's error where set.
DecayKernel hooked(DecayKernel run, bool wrong) {
  return [run = std::move(run), wrong](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const torch::Tensor& log_a, const torch::Tensor& log_b,
                                       const torch::Tensor& state0) {
    auto r = run(q, k, v, log_a, log_b, state0);
    if (wrong) r.y = r.y * 1.1;
    return r;
  };
}

bool wrong_kernel(CustomKernel kernel) { return kernel_made_wrong(kernel_name(kernel)); }

// The check itself: a small input of the class (T = 80: off the 64-step chunk and the 16-step segment). On the CPU
// either form may run for a class (form_race.h decides per length and per backward), so both must agree; the
// comparison further off its tolerance is the verdict.
KernelComparison check_class(CustomKernel kernel, const torch::Tensor& q, const torch::Tensor& v,
                             const torch::Tensor& log_a, const torch::Tensor& log_b) {
  DecayCase c;
  c.T = 80, c.D = v.size(3), c.M = q.size(3), c.dtype = q.scalar_type(), c.device = q.device();
  c.value_gate = value_gate_of(log_a), c.key_gate = log_b.defined(), c.seed = 20240611;
  if (kernel == CustomKernel::cuda_chunked) return compare_with_libtorch(custom_kernel(kernel), c);
  const bool wrong = wrong_kernel(kernel);
  const auto fused = compare_with_libtorch(hooked(decay_recurrence_fused, wrong), c);
  const auto chunked = compare_with_libtorch(hooked(decay_recurrence_chunk_cpu, wrong), c);
  return chunked.max_error / chunked.tolerance > fused.max_error / fused.tolerance ? chunked : fused;
}

}  // namespace

const char* kernel_name(CustomKernel kernel) {
  return kernel == CustomKernel::cuda_chunked ? "decay_chunks_cuda" : "decay_fused_cpu";
}

void set_kernel_self_check(bool enabled) {
  const std::lock_guard<std::mutex> lock(guard().mutex);
  guard().self_check = enabled;
}

void on_kernel_fallback(std::function<void(const KernelFallback&)> listener) {
  const std::lock_guard<std::mutex> lock(guard().mutex);
  guard().listener = std::move(listener);
}

void set_wrong_kernel(const std::string& name) {
  const std::lock_guard<std::mutex> lock(guard().mutex);
  guard().wrong_kernel = name;
}

bool kernel_made_wrong(const std::string& kernel) {
  const std::lock_guard<std::mutex> lock(guard().mutex);
  return guard().wrong_kernel == kernel;
}

void reset_kernel_verdicts() {
  const std::lock_guard<std::mutex> lock(guard().mutex);
  guard().trusted.clear();
}

DecayKernel custom_kernel(CustomKernel kernel) {
  return hooked([kernel](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                         const torch::Tensor& log_a, const torch::Tensor& log_b,
                         const torch::Tensor& state0) { return run_plain(kernel, q, k, v, log_a, log_b, state0); },
                wrong_kernel(kernel));
}

bool kernel_verdict(const std::string& kernel, const std::string& shape_class, const torch::Tensor& input,
                    const std::function<KernelComparison()>& check) {
  auto& g = guard();
  const auto key = kernel + " " + shape_class;
  {
    const std::lock_guard<std::mutex> lock(g.mutex);
    if (!g.self_check) return true;
    if (const auto it = g.trusted.find(key); it != g.trusted.end()) return it->second;
  }
  if (cuda_graph_capturing(input)) return false;
  const auto comparison = check();  // unlocked: it runs the kernel through the guard
  std::function<void(const KernelFallback&)> listener;
  {
    const std::lock_guard<std::mutex> lock(g.mutex);
    g.trusted[key] = comparison.passed();
    listener = g.listener;
  }
  if (!comparison.passed() && listener) listener({kernel, shape_class, comparison});
  return comparison.passed();
}

bool kernel_trusted(CustomKernel kernel, const torch::Tensor& q, const torch::Tensor& v, const torch::Tensor& log_a,
                    const torch::Tensor& log_b) {
  return kernel_verdict(kernel_name(kernel), shape_class(q, v, log_a, log_b), q,
                        [&] { return check_class(kernel, q, v, log_a, log_b); });
}

}  // namespace fwlab::kernels

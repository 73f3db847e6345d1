// The delta family's forms and their race (kernels/delta/form_race.h); the decision's keeping is
// kernels/common/form_choice.h's.
#include "kernels/delta/form_race.h"

#include <ATen/CPUGeneratorImpl.h>

#include <sstream>

#include "kernels/common/form_choice.h"
#include "kernels/common/recurrent_step.h"
#include "kernels/delta/cuda_guard.h"
#include "kernels/delta/delta.h"

namespace fwlab::kernels {

namespace {

struct Candidate {
  const char* name;
  int64_t chunk;  // 0: the fused recurrent kernel
};
constexpr Candidate kCandidates[] = {{"fused", 0}, {"chunk 16", 16}, {"chunk 32", 32}, {"chunk 64", 64}};

RecurrenceResult run_form(const Candidate& form, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                          const torch::Tensor& alpha, const torch::Tensor& beta, const torch::Tensor& state0) {
  if (form.chunk == 0)
    return alpha.defined() ? gated_delta_recurrence_fused(q, k, v, alpha, beta, state0)
                           : delta_recurrence_fused(q, k, v, beta, state0);
  return gated_delta_recurrence_chunk_cpu(q, k, v, alpha, beta, state0, form.chunk);
}

std::string form_class(const torch::Tensor& q, const torch::Tensor& v, const torch::Tensor& alpha, bool backward) {
  std::ostringstream out;
  out << q.device().str() << ' ' << c10::toString(q.scalar_type()) << (alpha.defined() ? " gated" : " delta")
      << " D=" << v.size(3) << " M=" << q.size(3) << " T<=" << power_of_two_at_least(q.size(2))
      << (backward ? " backward" : " forward");
  return out.str();
}

// One candidate's time on random inputs shaped like the call's (B * H capped at 16), the better of two runs after
// a warm-up; forward and, where the call will need it, backward.
double candidate_ms(const Candidate& form, const torch::Tensor& q, const torch::Tensor& v, bool gated, bool backward) {
  const int64_t BH = std::min<int64_t>(16, q.size(0) * q.size(1)), T = q.size(2), M = q.size(3), D = v.size(3);
  const auto opt = q.options().requires_grad(false);
  const auto gen = at::detail::createCPUGenerator(20241127);
  auto randn = [&](int64_t w) { return torch::randn({1, BH, T, w}, gen, opt.device(torch::kCPU)).to(opt); };
  namespace F = torch::nn::functional;
  auto unit = [&] { return F::normalize(randn(M), F::NormalizeFuncOptions().dim(-1)); };
  std::vector<torch::Tensor> in{unit(), unit(), randn(D), gated ? torch::sigmoid(randn(1) + 2) : torch::Tensor(),
                                torch::sigmoid(randn(1))};
  for (auto& t : in)
    if (t.defined()) t.requires_grad_(backward);
  return race_ms([&] { return run_form(form, in[0], in[1], in[2], in[3], in[4], {}); }, backward);
}

FormChoice race(const torch::Tensor& q, const torch::Tensor& v, const torch::Tensor& alpha, bool backward) {
  FormChoice choice{"delta", form_class(q, v, alpha, backward), kCandidates[3].name, {}};
  if (!q.is_cpu()) return choice;
  torch::AutoGradMode grad(backward);
  const auto time = [&](const Candidate& form) {
    choice.ms.emplace_back(form.name, candidate_ms(form, q, v, alpha.defined(), backward));
    return choice.ms.back().second;
  };
  // The fused kernel keeps its place unless a chunked form is 10% faster.
  choice.chosen = kCandidates[0].name;
  double best = 0.9 * time(kCandidates[0]);
  for (size_t n = 1; n < std::size(kCandidates); ++n)
    if (const double ms = time(kCandidates[n]); ms < best) best = ms, choice.chosen = kCandidates[n].name;
  return choice;
}

Candidate candidate_named(const std::string& name) {
  for (const auto& c : kCandidates)
    if (name == c.name) return c;
  return kCandidates[3];  // chunk 64
}

}  // namespace

RecurrenceResult delta_family_recurrence(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                         const torch::Tensor& alpha, const torch::Tensor& beta,
                                         const torch::Tensor& state0) {
  // A decode token off the CPU: one step, not a chunk (kernels/common/recurrent_step.h).
  if (const StepInputs step{q, k, v, {}, {}, alpha, beta, state0}; one_token_step_applies(step))
    return one_token_step(step);
  // On CUDA the chunked kernel, for shape classes that passed its first-use check (kernels/delta/cuda_guard.h).
  if (delta_cuda_kernel_trusted(q, v, alpha)) return delta_cuda_kernel(q, k, v, alpha, beta, state0);
  if (q.is_cpu() && delta_routed_to_host_kernel())  // the test hook (kernels/delta/cuda_guard.h)
    return gated_delta_recurrence_chunks_host(q, k, v, alpha, beta, state0, 2);
  const bool backward = gradients_needed({q, k, v, alpha, beta, state0});
  return run_chosen_form(
      "delta", form_class(q, v, alpha, backward), "chunk 64", [&] { return race(q, v, alpha, backward); },
      [&](const std::string& form) { return run_form(candidate_named(form), q, k, v, alpha, beta, state0); });
}

}  // namespace fwlab::kernels

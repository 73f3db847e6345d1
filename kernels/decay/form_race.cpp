// The decay rules' form on the CPU, decided by measurement (kernels/common/form_choice.h runs the decisions):
// the fused recurrent kernel or the chunked kernel around BLAS (kernels/decay/chunk_cpu.h), per shape class, the
// chunked one only where it is 10% faster.
#include <ATen/CPUGeneratorImpl.h>

#include <sstream>

#include "kernels/decay/form_race.h"
#include "kernels/common/cpu_blas.h"
#include "kernels/common/form_choice.h"
#include "kernels/decay/decay.h"

namespace fwlab::kernels {

namespace {

RecurrenceResult run_decay_form(const std::string& form, const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v, const torch::Tensor& log_a, const torch::Tensor& log_b,
                                const torch::Tensor& state0) {
  if (form == "chunk cpu") return decay_recurrence_chunk_cpu(q, k, v, log_a, log_b, state0);
  return decay_recurrence_fused(q, k, v, log_a, log_b, state0);
}

std::string width_of(const torch::Tensor& gate) { return gate.defined() ? std::to_string(gate.size(3)) : "none"; }

std::string decay_class(const torch::Tensor& q, const torch::Tensor& v, const torch::Tensor& log_a,
                        const torch::Tensor& log_b, bool backward) {
  std::ostringstream out;
  out << q.device().str() << ' ' << c10::toString(q.scalar_type()) << " decay a=" << width_of(log_a)
      << " b=" << width_of(log_b) << " D=" << v.size(3) << " M=" << q.size(3)
      << " T<=" << power_of_two_at_least(q.size(2)) << (backward ? " backward" : " forward");
  return out.str();
}

// A form's time on random inputs shaped like the call's (B * H capped at 16, gates of the call's widths), the
// better of two runs after a warm-up; its own generator leaves the process's random stream alone.
double decay_form_ms(const std::string& form, const torch::Tensor& q, const torch::Tensor& v,
                     const torch::Tensor& log_a, const torch::Tensor& log_b, bool backward) {
  const int64_t BH = std::min<int64_t>(16, q.size(0) * q.size(1)), T = q.size(2), M = q.size(3), D = v.size(3);
  const auto opt = q.options().requires_grad(false);
  const auto gen = at::detail::createCPUGenerator(20261127);
  auto randn = [&](int64_t w) { return torch::randn({1, BH, T, w}, gen, opt); };
  auto gate = [&](const torch::Tensor& like) {
    return like.defined() ? torch::log_sigmoid(randn(like.size(3)) + 2) : torch::Tensor();
  };
  std::vector<torch::Tensor> in{randn(M), randn(M), randn(D), gate(log_a), gate(log_b)};
  for (auto& t : in)
    if (t.defined()) t.requires_grad_(backward);
  return race_ms([&] { return run_decay_form(form, in[0], in[1], in[2], in[3], in[4], {}); }, backward);
}

FormChoice decay_race(const std::string& key, const torch::Tensor& q, const torch::Tensor& v,
                      const torch::Tensor& log_a, const torch::Tensor& log_b, bool backward) {
  torch::AutoGradMode grad(backward);
  FormChoice choice{"decay", key, "fused", {}};
  for (const char* form : {"fused", "chunk cpu"})
    choice.ms.emplace_back(form, decay_form_ms(form, q, v, log_a, log_b, backward));
  if (choice.ms[1].second < 0.9 * choice.ms[0].second) choice.chosen = "chunk cpu";
  return choice;
}

}  // namespace

RecurrenceResult decay_family_recurrence(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                         const torch::Tensor& log_a, const torch::Tensor& log_b,
                                         const torch::Tensor& state0) {
  const bool backward = gradients_needed({q, k, v, log_a, log_b, state0});
  if (!q.is_cpu() || !blas::available()) return decay_recurrence_fused(q, k, v, log_a, log_b, state0);
  const auto key = decay_class(q, v, log_a, log_b, backward);
  return run_chosen_form(
      "decay", key, "chunk cpu", [&] { return decay_race(key, q, v, log_a, log_b, backward); },
      [&](const std::string& form) { return run_decay_form(form, q, k, v, log_a, log_b, state0); });
}

}  // namespace fwlab::kernels

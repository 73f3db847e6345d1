#include "worker/optimizer.h"

#include "kernels/optim/adamw_cpu.h"

#include <fmt/format.h>

#include <cmath>
#include <unordered_map>

namespace fwlab {

AdamW::AdamW(const NamedTensors& params, const OptimSpec& spec) : spec_(spec) {
  for (const auto& [name, p] : params) {
    if (!p.requires_grad()) continue;
    slots_.push_back({name, p, torch::zeros_like(p), torch::zeros_like(p), p.dim() >= 2});
  }
}

void AdamW::zero_grad() {
  for (auto& s : slots_)
    if (s.param.grad().defined()) s.param.mutable_grad() = torch::Tensor();
}

void AdamW::step(double lr) {
  torch::NoGradGuard guard;
  ++steps_;
  const double bc1 = 1.0 - std::pow(spec_.beta1, static_cast<double>(steps_));
  const double bc2 = 1.0 - std::pow(spec_.beta2, static_cast<double>(steps_));
  for (auto& s : slots_) {
    const auto& g = s.param.grad();
    if (!g.defined()) continue;
    const bool decays = s.decay && spec_.weight_decay > 0;
    if (kernels::adamw_loop_applies(s.param, s.exp_avg, s.exp_avg_sq)) {  // one pass; the lines below are its twin
      kernels::adamw_update_cpu(
          s.param, s.exp_avg, s.exp_avg_sq,
          {lr, spec_.beta1, spec_.beta2, spec_.eps, decays ? 1.0 - lr * spec_.weight_decay : 1.0, bc1, bc2});
      continue;
    }
    if (decays) s.param.mul_(1.0 - lr * spec_.weight_decay);
    s.exp_avg.mul_(spec_.beta1).add_(g, 1.0 - spec_.beta1);
    s.exp_avg_sq.mul_(spec_.beta2).addcmul_(g, g, 1.0 - spec_.beta2);
    auto denom = (s.exp_avg_sq / bc2).sqrt_().add_(spec_.eps);
    s.param.addcdiv_(s.exp_avg, denom, -lr / bc1);
  }
}

NamedTensors AdamW::state() const {
  NamedTensors out;
  for (const auto& s : slots_) {
    out.emplace_back(s.name + ".exp_avg", s.exp_avg);
    out.emplace_back(s.name + ".exp_avg_sq", s.exp_avg_sq);
  }
  return out;
}

void AdamW::load_state(const NamedTensors& tensors, int64_t steps) {
  std::unordered_map<std::string, torch::Tensor> by_name(tensors.begin(), tensors.end());
  torch::NoGradGuard guard;
  for (auto& s : slots_) {
    for (auto [suffix, target] : std::initializer_list<std::pair<const char*, torch::Tensor*>>{
             {".exp_avg", &s.exp_avg}, {".exp_avg_sq", &s.exp_avg_sq}}) {
      auto it = by_name.find(s.name + suffix);
      if (it == by_name.end() || it->second.sizes() != target->sizes())
        throw std::runtime_error(
            fmt::format("optimizer state for '{}{}' is missing or has the wrong shape", s.name, suffix));
      target->copy_(it->second);
    }
  }
  steps_ = steps;
}

double clip_gradients(const std::vector<torch::Tensor>& params, double max_norm) {
  if (kernels::grads_fit_clip_loop(params)) return kernels::clip_grad_norm_cpu(params, max_norm);
  return torch::nn::utils::clip_grad_norm_(params, max_norm);
}

double learning_rate(const OptimSpec& spec, int64_t step, int64_t total_steps) {
  if (step < spec.warmup_steps) return spec.lr * static_cast<double>(step + 1) / static_cast<double>(spec.warmup_steps);
  const double span = static_cast<double>(std::max<int64_t>(1, total_steps - spec.warmup_steps));
  const double progress = std::min(1.0, static_cast<double>(step - spec.warmup_steps) / span);
  return spec.min_lr + 0.5 * (spec.lr - spec.min_lr) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace fwlab

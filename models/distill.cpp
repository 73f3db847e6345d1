#include "models/distill.h"

namespace fwlab {

torch::Tensor kl_distillation(const torch::Tensor& student_logits, const torch::Tensor& teacher_logits,
                              double temperature) {
  const auto wide = [](const torch::Tensor& t) { return t.scalar_type() == torch::kDouble ? t : t.to(torch::kFloat); };
  const auto vocab = student_logits.size(-1);
  const auto log_s = torch::log_softmax(wide(student_logits).reshape({-1, vocab}) / temperature, -1);
  const auto log_t = torch::log_softmax(wide(teacher_logits).detach().reshape({-1, vocab}) / temperature, -1);
  const auto per_position = (log_t.exp() * (log_t - log_s)).sum(-1);
  return per_position.mean() * (temperature * temperature);
}

}  // namespace fwlab

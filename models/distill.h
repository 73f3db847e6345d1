// Knowledge distillation on output distributions (Hinton et al. 2015; RADLADS' second step and the 2025 hybrid
// distillation work, which use KL(teacher || student) at temperature 1): the student matches the teacher's
// next-token distribution, not only the data's one token.
#pragma once

#include <torch/torch.h>

namespace fwlab {

// KL(p_t || p_s) = sum_v p_t(v) (log p_t(v) - log p_s(v)) with p = softmax(logits / temperature), averaged over
// positions and multiplied by temperature^2 (Hinton's scaling, so that the gradient's size does not shrink as the
// temperature grows; at temperature 1 it is the plain KL). Logits [..., V]; the teacher's carry no gradient.
// Computed in fp32 at least, whatever the logits' precision.
torch::Tensor kl_distillation(const torch::Tensor& student_logits, const torch::Tensor& teacher_logits,
                              double temperature);

}  // namespace fwlab

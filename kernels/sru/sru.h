// The SRU op (Lei et al. 2018, 2021): its fused CPU form and its per-timestep twin.
#pragma once

#include <torch/torch.h>

#include "kernels/common/recurrence.h"

namespace fwlab::kernels {

// SRU elementwise recurrence with highway (Lei et al. 2018, 2021):
//   f_t = sigmoid(U1_t + v_f * c_{t-1} + b_f),  r_t = sigmoid(U2_t + v_r * c_{t-1} + b_r)
//   c_t = f_t * c_{t-1} + (1 - f_t) * U0_t,     h_t = r_t * c_t + (1 - r_t) * x_t
// u: [B, T, 3, D] (blocks U0, U1, U2); x: [B, T, D]; v_f, v_r, b_f, b_r: [D]; c0: [B, D] or undefined.
// Returns h [B, T, D] and c_T [B, D]. The fused form is a raw-pointer CPU kernel with its own backward (it
// falls back to the naive loop on other devices).
RecurrenceResult sru_recurrence_fused(const torch::Tensor& u, const torch::Tensor& x, const torch::Tensor& v_f,
                                      const torch::Tensor& v_r, const torch::Tensor& b_f, const torch::Tensor& b_r,
                                      const torch::Tensor& c0);
RecurrenceResult sru_recurrence_naive(const torch::Tensor& u, const torch::Tensor& x, const torch::Tensor& v_f,
                                      const torch::Tensor& v_r, const torch::Tensor& b_f, const torch::Tensor& b_r,
                                      const torch::Tensor& c0);

}  // namespace fwlab::kernels

// The decay recurrence (kernels/decay/decay.h) on the CPU in the form measured fastest for its shape class (dtype,
// the gates' widths, D, M, T up to a power of two, with or without a backward): the fused recurrent kernel or the
// chunked kernel around BLAS, raced once per class and process and kept as the delta rules' decisions are
// (kernels/common/form_choice.h: the same listener, file and resume-file record). Off the CPU, or without
// BLAS symbols in the process, the fused kernel.
#pragma once

#include "kernels/common/recurrence.h"

namespace fwlab::kernels {

RecurrenceResult decay_family_recurrence(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                         const torch::Tensor& log_a, const torch::Tensor& log_b,
                                         const torch::Tensor& state0);

}  // namespace fwlab::kernels

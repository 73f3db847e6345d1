// The form of the delta rule or the gated delta rule a model runs, decided by measurement (kernels/common/
// form_choice.h) per shape class (device, dtype, gated or not, D, M, T rounded up to a power of two, with or without
// a backward): the fused recurrent kernel and the chunked kernel (chunk_cpu.cpp, around BLAS) at 16, 32 and 64
// steps a chunk, timed on inputs of that shape (B * H capped at 16; one warm-up, then the better of two runs; the
// inputs drawn from a generator of their own, so the process's random stream is untouched). A chunked form wins
// only where it beats the fused kernel by 10% (near-ties stay with one form from process to process). On devices
// other than the CPU the fused kernel is the naive loop, so the libtorch chunked form (64) runs there, unraced.
#pragma once

#include <torch/torch.h>

#include "kernels/common/recurrence.h"

namespace fwlab::kernels {

// The delta rule (alpha undefined) or the gated delta rule (kernels/delta/delta.h) in the form decided for the
// inputs' class; a single token without gradients off the CPU in its one-token step (kernels/common/recurrent_step.h).
RecurrenceResult delta_family_recurrence(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                         const torch::Tensor& alpha, const torch::Tensor& beta,
                                         const torch::Tensor& state0);

}  // namespace fwlab::kernels

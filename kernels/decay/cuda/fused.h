// The fused recurrent decay kernel on CUDA (the GPU twin of the fused CPU kernel; kernels/decay/cuda/rows.h has
// the arithmetic). A plain C++ API over device pointers, sizes and a stream: no libtorch. float32 and float64.
// Returns the launch's cudaError_t.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/decay/cuda/rows.h"

namespace fwlab::cuda {

// y [heads, steps, D], state_out [heads, D, M], checkpoints [heads, p.segments(), D, M] (kept for the backward).
template <typename T>
cudaError_t decay_fused_forward(const DecayProblem<T>& p, T* y, T* state_out, T* checkpoints, cudaStream_t stream);

// The gradients (DecayGrads): the summed ones (dq, dk, dlog_b, a per-head dlog_a) are zeroed here first;
// grads.workspace holds p.workspace_size() values of scratch.
template <typename T>
cudaError_t decay_fused_backward(const DecayProblem<T>& p, const T* checkpoints, const DecayGrads<T>& grads,
                                 cudaStream_t stream);

}  // namespace fwlab::cuda

// One token of every fast-weight rule's recurrence on CUDA, all heads in one launch: the decode step (issue "GPU
// models faster than attention"). A plain C++ API over device pointers, no libtorch; float32 and float64 (16-bit
// inputs are widened by the binding, kernels/common/recurrent_step.h). Per head, S [D, M]:
//   decay family (add, gated, decay):  S' = diag(a) S diag(b) + v kᵀ,  a = exp(log_a), b = exp(log_b)
//   delta family (delta, gated delta): S' = α S + β (v - α S k) kᵀ   (= α S (I - β k kᵀ) + β v kᵀ)
// and y = S' q. The arithmetic is kernels/naive.cpp's step forms', term by term.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fwlab::cuda {

template <typename T>
struct StepProblem {
  const T* q = nullptr;  // [heads, M]
  const T* k = nullptr;  // [heads, M]
  const T* v = nullptr;  // [heads, D]
  // Decay family: log gates, [heads, a_width] with a_width 1 or D and [heads, b_width] with b_width 1 or M; null:
  // no gate on that side.
  const T* log_a = nullptr;
  const T* log_b = nullptr;
  int64_t a_width = 0, b_width = 0;
  // Delta family (beta not null): [heads] each; alpha null is α = 1 (the delta rule).
  const T* alpha = nullptr;
  const T* beta = nullptr;
  const T* state_in = nullptr;  // [heads, D, M]; null: zero
  T* state_out = nullptr;       // [heads, D, M]; may be state_in (each element is read before it is written)
  T* y = nullptr;               // [heads, D]
  int64_t heads = 0, D = 0, M = 0;
};

// The widest key side a block stages (q, k and the key gates in shared memory: 24 KiB in fp64).
constexpr int64_t kStepMaxM = 1024;

// Returns the launch's cudaError_t; cudaErrorInvalidValue for sizes it cannot hold (M above kStepMaxM).
template <typename T>
cudaError_t recurrent_step(const StepProblem<T>& p, cudaStream_t stream);

}  // namespace fwlab::cuda

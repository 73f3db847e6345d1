// CUDA launch of the fused recurrent decay kernel: one block per head, one thread per state row
// (kernels/decay/cuda/rows.h). Rows are independent in the forward; in the backward the gradients all rows share are
// summed with atomicAdd.
#include "kernels/decay/cuda/fused.h"

namespace fwlab::cuda {

namespace {

constexpr int kThreads = 64;  // rows per block at once; a head with D > 64 rows loops

struct AddAtomic {
  template <typename T>
  __device__ void operator()(T* at, T value) const {
    atomicAdd(at, value);
  }
};

template <typename T>
__global__ void forward_kernel(DecayProblem<T> p, T* y, T* state_out, T* checkpoints) {
  const int64_t h = blockIdx.x;
  for (int64_t i = threadIdx.x; i < p.D; i += blockDim.x) decay_row_forward(p, h, i, y, state_out, checkpoints);
}

template <typename T>
__global__ void backward_kernel(DecayProblem<T> p, const T* checkpoints, DecayGrads<T> g) {
  const int64_t h = blockIdx.x;
  for (int64_t i = threadIdx.x; i < p.D; i += blockDim.x) decay_row_backward(p, h, i, checkpoints, g, AddAtomic{});
}

cudaError_t zero(void* at, size_t bytes, cudaStream_t stream) {
  return at ? cudaMemsetAsync(at, 0, bytes, stream) : cudaSuccess;
}

}  // namespace

template <typename T>
cudaError_t decay_fused_forward(const DecayProblem<T>& p, T* y, T* state_out, T* checkpoints, cudaStream_t stream) {
  if (p.M <= 0 || p.D <= 0) return cudaErrorInvalidValue;
  if (p.heads == 0) return cudaSuccess;
  forward_kernel<T><<<static_cast<unsigned>(p.heads), kThreads, 0, stream>>>(p, y, state_out, checkpoints);
  return cudaGetLastError();
}

template <typename T>
cudaError_t decay_fused_backward(const DecayProblem<T>& p, const T* checkpoints, const DecayGrads<T>& g,
                                 cudaStream_t stream) {
  if (p.M <= 0 || p.D <= 0 || (p.heads > 0 && g.workspace == nullptr)) return cudaErrorInvalidValue;
  const size_t keys = static_cast<size_t>(p.heads * p.steps * p.M) * sizeof(T);
  const size_t per_head_gate = static_cast<size_t>(p.heads * p.steps) * sizeof(T);
  cudaError_t e = cudaSuccess;
  if (e == cudaSuccess) e = zero(g.dq, keys, stream);
  if (e == cudaSuccess) e = zero(g.dk, keys, stream);
  if (e == cudaSuccess) e = zero(g.dlog_b, keys, stream);
  if (e == cudaSuccess && p.a_width == 1) e = zero(g.dlog_a, per_head_gate, stream);
  if (e != cudaSuccess) return e;
  if (p.heads == 0) return cudaSuccess;
  backward_kernel<T><<<static_cast<unsigned>(p.heads), kThreads, 0, stream>>>(p, checkpoints, g);
  return cudaGetLastError();
}

template cudaError_t decay_fused_forward<float>(const DecayProblem<float>&, float*, float*, float*, cudaStream_t);
template cudaError_t decay_fused_forward<double>(const DecayProblem<double>&, double*, double*, double*, cudaStream_t);
template cudaError_t decay_fused_backward<float>(const DecayProblem<float>&, const float*, const DecayGrads<float>&,
                                                 cudaStream_t);
template cudaError_t decay_fused_backward<double>(const DecayProblem<double>&, const double*, const DecayGrads<double>&,
                                                  cudaStream_t);

}  // namespace fwlab::cuda

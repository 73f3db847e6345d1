// kernels/cuda/recurrent_step.h: one block per head, one warp per state row at a time. The lanes stride over the
// row's M columns, so the row is read and written in coalesced segments; a row's sums (S k, S' q) are warp
// reductions. q, k and the key-side gates sit in shared memory, read by every warp of the head.
#include "kernels/cuda/recurrent_step.h"

namespace fwlab::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kLanes = 32;

template <typename T>
__device__ T warp_sum(T x) {
  for (int offset = kLanes / 2; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// shared: q [M], k [M], b [M] (the key-side gate, exp(log_b); 1 without one).
template <typename T>
__device__ void stage_keys(const StepProblem<T>& p, int64_t h, T* q, T* k, T* b) {
  for (int64_t j = threadIdx.x; j < p.M; j += blockDim.x) {
    q[j] = p.q[h * p.M + j], k[j] = p.k[h * p.M + j];
    b[j] = p.log_b ? exp(p.log_b[h * p.b_width + (p.b_width == 1 ? 0 : j)]) : T(1);
  }
  __syncthreads();
}

// One row i of the decay family: S'[i, j] = a_i S[i, j] b_j + v_i k_j; returns y_i = Σ_j S'[i, j] q_j.
template <typename T>
__device__ T decay_row(const StepProblem<T>& p, int64_t h, int64_t i, const T* q, const T* k, const T* b) {
  const T a = p.log_a ? exp(p.log_a[h * p.a_width + (p.a_width == 1 ? 0 : i)]) : T(1);
  const T vi = p.v[h * p.D + i];
  const int64_t row = (h * p.D + i) * p.M;
  T acc = 0;
  for (int64_t j = threadIdx.x % kLanes; j < p.M; j += kLanes) {
    const T s = (p.state_in ? a * p.state_in[row + j] * b[j] : T(0)) + vi * k[j];
    p.state_out[row + j] = s;
    acc += s * q[j];
  }
  return warp_sum(acc);
}

// One row i of the delta family: u_i = Σ_j S[i, j] k_j, S'[i, j] = α S[i, j] + β (v_i - α u_i) k_j; returns y_i.
template <typename T>
__device__ T delta_row(const StepProblem<T>& p, int64_t h, int64_t i, const T* q, const T* k) {
  const T alpha = p.alpha ? p.alpha[h] : T(1), beta = p.beta[h];
  const int64_t row = (h * p.D + i) * p.M;
  const int lane = threadIdx.x % kLanes;
  T u = 0;
  if (p.state_in)
    for (int64_t j = lane; j < p.M; j += kLanes) u += p.state_in[row + j] * k[j];
  const T write = beta * (p.v[h * p.D + i] - alpha * warp_sum(u));
  T acc = 0;
  for (int64_t j = lane; j < p.M; j += kLanes) {
    const T s = (p.state_in ? alpha * p.state_in[row + j] : T(0)) + write * k[j];
    p.state_out[row + j] = s;
    acc += s * q[j];
  }
  return warp_sum(acc);
}

template <typename T>
__global__ void step_kernel(StepProblem<T> p) {
  extern __shared__ unsigned char shared_bytes[];
  T* q = reinterpret_cast<T*>(shared_bytes);
  T* k = q + p.M;
  T* b = k + p.M;
  const int64_t h = blockIdx.x;
  stage_keys(p, h, q, k, b);
  for (int64_t i = threadIdx.x / kLanes; i < p.D; i += kWarps) {
    const T y = p.beta ? delta_row(p, h, i, q, k) : decay_row(p, h, i, q, k, b);
    if (threadIdx.x % kLanes == 0) p.y[h * p.D + i] = y;
  }
}

}  // namespace

template <typename T>
cudaError_t recurrent_step(const StepProblem<T>& p, cudaStream_t stream) {
  if (p.M <= 0 || p.D <= 0 || p.M > kStepMaxM) return cudaErrorInvalidValue;
  if (p.heads == 0) return cudaSuccess;
  const size_t shared = 3 * static_cast<size_t>(p.M) * sizeof(T);
  step_kernel<T><<<static_cast<unsigned>(p.heads), kWarps * kLanes, shared, stream>>>(p);
  return cudaGetLastError();
}

template cudaError_t recurrent_step<float>(const StepProblem<float>&, cudaStream_t);
template cudaError_t recurrent_step<double>(const StepProblem<double>&, cudaStream_t);

}  // namespace fwlab::cuda

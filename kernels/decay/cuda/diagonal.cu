// CUDA launch of the chunked decay kernel's diagonal pair (kernels/decay/cuda/diagonal.h): one thread per step's row.
#include "kernels/cuda/launch.cuh"
#include "kernels/decay/cuda/chunks_api.h"
#include "kernels/decay/cuda/diagonal.h"

namespace fwlab::cuda {

namespace {

constexpr int kRowThreads = 128;

template <typename In, typename Acc>
__global__ void diagonal_kernel(Diagonal<In, Acc> p, bool backward) {
  const int64_t item = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (item >= p.items()) return;
  backward ? p.backward(item) : p.forward(item);
}

cudaError_t run(ChunkDtype dtype, const DiagonalArgs& args, bool backward, cudaStream_t stream) {
  return with_chunk_types(dtype, [&](auto in, auto acc) {
    const Diagonal<decltype(in), decltype(acc)> p{args};
    const dim3 blocks(unsigned((p.items() + kRowThreads - 1) / kRowThreads));
    return launch(diagonal_kernel<decltype(in), decltype(acc)>, blocks, kRowThreads, 0, stream, p, backward);
  });
}

}  // namespace

cudaError_t decay_diagonal_forward(ChunkDtype dtype, const DiagonalArgs& args, cudaStream_t stream) {
  return run(dtype, args, false, stream);
}

cudaError_t decay_diagonal_backward(ChunkDtype dtype, const DiagonalArgs& args, cudaStream_t stream) {
  return run(dtype, args, true, stream);
}

}  // namespace fwlab::cuda

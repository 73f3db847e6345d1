// CUDA launch of the chunked decay kernel's gate work (kernels/decay/cuda/gates.h): one thread per item, in stream
// order, so that each gradient pass sees the one before it.
#include "kernels/cuda/launch.cuh"
#include "kernels/decay/cuda/chunks_api.h"
#include "kernels/decay/cuda/gates.h"

namespace fwlab::cuda {

namespace {

constexpr int kGateThreads = 256;

template <typename Acc>
__global__ void sums_kernel(GateSums<Acc> p) {
  const int64_t item = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (item < p.items()) p.run(item);
}

enum class Pass { chunk_totals, later_chunks, step_sums };

// One column of one (head, chunk) per thread (passes 1 and 3), or of one head (pass 2).
template <typename In, typename Acc>
__global__ void gradients_kernel(GateGradients<In, Acc> p, Pass pass) {
  const int64_t item = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, w = p.a.out_width, N = p.chunks();
  Acc sum, lost;
  if (pass == Pass::later_chunks) {
    if (item < p.column_items()) p.later_chunks(item / w, item % w, 1, &sum, &lost);
  } else if (item < p.chunk_items()) {
    if (pass == Pass::chunk_totals)
      p.chunk_totals(item / w / N, item / w % N, item % w, 1, &sum, &lost);
    else
      p.step_sums(item / w / N, item / w % N, item % w, 1, &sum, &lost);
  }
}

dim3 blocks_for(int64_t items) { return dim3(unsigned((items + kGateThreads - 1) / kGateThreads)); }

}  // namespace

cudaError_t decay_gate_sums(ChunkDtype dtype, const GateSumArgs& args, cudaStream_t stream) {
  return with_chunk_types(dtype, [&](auto, auto acc) {
    const GateSums<decltype(acc)> p{args};
    return launch(sums_kernel<decltype(acc)>, blocks_for(p.items()), kGateThreads, 0, stream, p);
  });
}

cudaError_t decay_gate_gradients(ChunkDtype dtype, const GateGradientArgs& args, cudaStream_t stream) {
  return with_chunk_types(dtype, [&](auto in, auto acc) {
    const GateGradients<decltype(in), decltype(acc)> p{args};
    const auto kernel = gradients_kernel<decltype(in), decltype(acc)>;
    cudaError_t e = launch(kernel, blocks_for(p.chunk_items()), kGateThreads, 0, stream, p, Pass::chunk_totals);
    if (e == cudaSuccess)
      e = launch(kernel, blocks_for(p.column_items()), kGateThreads, 0, stream, p, Pass::later_chunks);
    if (e == cudaSuccess) e = launch(kernel, blocks_for(p.chunk_items()), kGateThreads, 0, stream, p, Pass::step_sums);
    return e;
  });
}

}  // namespace fwlab::cuda

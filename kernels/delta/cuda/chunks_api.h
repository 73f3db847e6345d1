// The delta family's chunked kernel on CUDA (kernels/delta/cuda/chunks.h has the arithmetic): a plain C++ API over
// device pointers, sizes, an element type and a stream, with no libtorch and no CUDA type headers, so that any
// libtorch's binding can call it. Every call returns the launches' cudaError_t.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/decay/cuda/chunks_api.h"  // ChunkDtype

namespace fwlab::cuda {

// The prepared problem (delta::Problem): steps a multiple of kChunk (64), padded with beta = 0. q, k, v, dy in `dtype`;
// beta, log_alpha [heads, steps] and everything else fp32 (fp64 for f64). Null log_alpha: the delta rule; null
// state0 / dstate_final: zeros. The workspaces g [heads, steps], W [heads, steps, M], U, u, du [heads, steps, D]
// are the caller's allocations.
struct DeltaChunkArgs {
  ChunkDtype dtype = ChunkDtype::f32;
  const void *q = nullptr, *k = nullptr, *v = nullptr, *dy = nullptr;
  const void *beta = nullptr, *log_alpha = nullptr, *state0 = nullptr, *dstate_final = nullptr;
  void *g = nullptr, *W = nullptr, *U = nullptr, *u = nullptr, *du = nullptr;
  int64_t heads = 0, steps = 0, D = 0, M = 0;
};

// y [heads, steps, D] and states [heads, steps / 64 + 1, D, M] (the last: the final state), accumulation type.
cudaError_t delta_chunks_forward(const DeltaChunkArgs& args, void* y, void* states, cudaStream_t stream);

// dq, dk [heads, steps, M], dv [heads, steps, D], dbeta and dlog_alpha [heads, steps] (dlog_alpha null for the delta
// rule), accumulation type; states and dstates [heads, steps / 64 + 1, D, M] are recomputed here (dstates[:, 0]: the
// gradient of state0).
cudaError_t delta_chunks_backward(const DeltaChunkArgs& args, void* states, void* dstates, void* dq, void* dk, void* dv,
                                  void* dbeta, void* dlog_alpha, cudaStream_t stream);

// Shared memory the largest program (the gradients) needs per block, to compare with the device's opt-in limit.
int64_t delta_chunks_shared_bytes(const DeltaChunkArgs& args);

}  // namespace fwlab::cuda

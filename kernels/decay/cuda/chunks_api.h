// The chunked decay kernel on CUDA (kernels/decay/cuda/chunks.h has the arithmetic): a plain C++ API over device
// pointers, sizes, an element type and a stream, with no libtorch and no CUDA type headers, so that any libtorch's
// binding can call it. Every call returns the launch's cudaError_t.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fwlab::cuda {

// The element type of q, k, v, dy and y. Gates, states and the gradients dq, dk, dv are fp64 for f64 inputs and
// fp32 otherwise; bf16 and f16 run the products on tensor cores (sm_80 or newer).
enum class ChunkDtype { f64, f32, bf16, f16 };

// The prepared problem (ChunkProblem in kernels/decay/cuda/chunks.h): steps a multiple of kChunk, D and M multiples of
// 16, gates summed from each chunk's start. Null A / B: no gate on that side; null state0 / dstate_final: zeros.
struct ChunkArgs {
  ChunkDtype dtype = ChunkDtype::f32;
  const void *q = nullptr, *k = nullptr, *v = nullptr, *dy = nullptr;
  const void *A = nullptr, *B = nullptr, *state0 = nullptr, *dstate_final = nullptr;
  int64_t heads = 0, steps = 0, D = 0, M = 0, a_width = 0;
};

// y [heads, steps, D] without the diagonal pair s = t (kernels/decay/cuda/chunks.h; the caller adds (q_t . k_t) v_t),
// in the states' type: fp32 (fp64 for f64); states [heads, steps / kChunk + 1, D, M]: the state at every chunk start,
// the last one the final state.
cudaError_t decay_chunks_forward(const ChunkArgs& args, void* y, void* states, cudaStream_t stream);

// dq, dk [heads, steps, M], dv [heads, steps, D], each without the diagonal pair (the caller adds it); states and
// dstates [heads, steps / kChunk + 1, D, M] are recomputed here (dstates[:, 0] is the gradient of state0).
cudaError_t decay_chunks_backward(const ChunkArgs& args, void* states, void* dstates, void* dq, void* dk, void* dv,
                                  cudaStream_t stream);

// The gates' chunk sums and gradients (kernels/decay/cuda/gates.h, whose argument structs say what each pointer holds),
// in the accumulation type of `dtype`; the gradients' x1 and x2 in its input type.
struct GateSumArgs;
struct GateGradientArgs;
cudaError_t decay_gate_sums(ChunkDtype dtype, const GateSumArgs& args, cudaStream_t stream);
cudaError_t decay_gate_gradients(ChunkDtype dtype, const GateGradientArgs& args, cudaStream_t stream);

// The diagonal pair added as the results leave the padded layout (kernels/decay/cuda/diagonal.h): y in the forward,
// dq, dk and dv in the backward.
struct DiagonalArgs;
cudaError_t decay_diagonal_forward(ChunkDtype dtype, const DiagonalArgs& args, cudaStream_t stream);
cudaError_t decay_diagonal_backward(ChunkDtype dtype, const DiagonalArgs& args, cudaStream_t stream);

// Shared memory one chunk program needs (bytes), to compare with the device's opt-in limit.
int64_t decay_chunks_shared_bytes(const ChunkArgs& args);

}  // namespace fwlab::cuda

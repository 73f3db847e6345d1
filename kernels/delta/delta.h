// The delta op: the delta rule (Schlag et al. 2021) and the gated delta rule (Yang, Kautz & Hatamizadeh 2024), every
// form of them; the one a model runs is chosen by delta_family_recurrence (kernels/common/form_choice.h).
#pragma once

#include <torch/torch.h>

#include "kernels/common/recurrence.h"

namespace fwlab::kernels {

// Delta rule (Schlag et al. 2021), k and q already sum-normalised by the caller:
//   S_t = S_{t-1} + beta_t (v_t - S_{t-1} k_t) k_t^T,   y_t = S_t q_t
// beta: [B, H, T, 1]. The fused form is a raw-pointer CPU kernel with its own backward (it falls back to the
// naive loop on other devices).
RecurrenceResult delta_recurrence_fused(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                        const torch::Tensor& beta, const torch::Tensor& state0);
RecurrenceResult delta_recurrence_naive(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                        const torch::Tensor& beta, const torch::Tensor& state0);
RecurrenceResult delta_recurrence_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const torch::Tensor& beta, const torch::Tensor& state);

// The chunkwise-parallel forms of the delta rule and the gated delta rule (kernels/delta/chunk_libtorch.cpp):
// within chunks of `chunk` steps dense matrix products (a triangular solve, Q K^T, the state's reads and writes),
// across chunks a recurrence C times shorter; the backward keeps the chunk-start states only. libtorch ops, so any
// device and dtype (alpha > 0: an alpha of exactly 0 is taken as float's smallest normal number).
RecurrenceResult delta_recurrence_chunked(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                          const torch::Tensor& beta, const torch::Tensor& state0, int64_t chunk);
RecurrenceResult gated_delta_recurrence_chunked(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                                const torch::Tensor& alpha, const torch::Tensor& beta,
                                                const torch::Tensor& state0, int64_t chunk);

// The same chunked forms as a raw-loop CPU kernel around BLAS products (kernels/delta/chunk_cpu.cpp), with
// its own backward that keeps the chunk-start states and recomputes each chunk's preparation; alpha undefined is
// the delta rule. float32 and float64 (16-bit inputs are widened); on other devices, or where the process has no
// BLAS symbols to call (chunk_cpu_available()), it runs gated_delta_recurrence_chunked.
RecurrenceResult gated_delta_recurrence_chunk_cpu(const torch::Tensor& q, const torch::Tensor& k,
                                                  const torch::Tensor& v, const torch::Tensor& alpha,
                                                  const torch::Tensor& beta, const torch::Tensor& state0,
                                                  int64_t chunk);
bool chunk_cpu_available();

// The chunked CUDA kernel of both rules (kernels/delta/cuda/chunks.h; alpha undefined: the delta rule): beta, alpha
// [B, H, T, 1]; any float dtype in, the accumulation in fp32 (fp64 for fp64), y in q's dtype, the final state in
// the accumulation type. delta_cuda_chunks_fit: whether its largest program fits the GPU's shared memory.
RecurrenceResult gated_delta_recurrence_cuda_chunked(const torch::Tensor& q, const torch::Tensor& k,
                                                     const torch::Tensor& v, const torch::Tensor& alpha,
                                                     const torch::Tensor& beta, const torch::Tensor& state0);
bool delta_cuda_chunks_fit(const torch::Tensor& q, const torch::Tensor& v);
// The same block programs run on the host (tests): `threads_per_block` threads emulate each block. tensor_cores:
// the tensor-core programs the GPU runs for bf16 and fp16, in any dtype, through the host's warp emulation
// (threads_per_block a multiple of 32).
RecurrenceResult gated_delta_recurrence_chunks_host(const torch::Tensor& q, const torch::Tensor& k,
                                                    const torch::Tensor& v, const torch::Tensor& alpha,
                                                    const torch::Tensor& beta, const torch::Tensor& state0,
                                                    int threads_per_block, bool tensor_cores = false);

// Gated delta rule (Yang, Kautz & Hatamizadeh 2024), k and q already normalised by the caller:
//   S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T,   y_t = S_t q_t
// alpha, beta: [B, H, T, 1] (alpha in [0, 1]). The fused form is a raw-pointer CPU kernel with a checkpointed
// backward that recomputes states instead of dividing by alpha (it runs the naive loop on other devices).
RecurrenceResult gated_delta_recurrence_fused(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                              const torch::Tensor& alpha, const torch::Tensor& beta,
                                              const torch::Tensor& state0);
RecurrenceResult gated_delta_recurrence_naive(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                              const torch::Tensor& alpha, const torch::Tensor& beta,
                                              const torch::Tensor& state0);
// One step; q, k: [B, H, M]; v: [B, H, D]; alpha, beta: [B, H, 1].
RecurrenceResult gated_delta_recurrence_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                             const torch::Tensor& alpha, const torch::Tensor& beta,
                                             const torch::Tensor& state);

}  // namespace fwlab::kernels

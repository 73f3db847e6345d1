// The decay op (Mao's decay rule; the additive and gated rules are its special cases): every form of it, the one a
// model runs chosen by decay_recurrence.
#pragma once

#include <torch/torch.h>

#include "kernels/common/recurrence.h"

namespace fwlab::kernels {

// Outer-product recurrence with a two-sided multiplicative decay (Mao's decay rule; the additive and gated rules
// are special cases):
//   S_t = diag(a_t) S_{t-1} diag(b_t) + v_t k_t^T,   y_t = S_t q_t   (read after write)
// q, k: [B, H, T, M]; v: [B, H, T, D]
// log_a: log of the value-side decay, [B, H, T, D] or [B, H, T, 1] (scalar per head), or undefined (a = 1)
// log_b: log of the key-side decay, [B, H, T, M], or undefined (b = 1)
// state0: [B, H, D, M] or undefined (zeros).  Returns y [B, H, T, D] and S_T [B, H, D, M].
RecurrenceResult decay_recurrence_chunked(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                          const torch::Tensor& log_a, const torch::Tensor& log_b,
                                          const torch::Tensor& state0, int64_t chunk);
RecurrenceResult decay_recurrence_naive(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                        const torch::Tensor& log_a, const torch::Tensor& log_b,
                                        const torch::Tensor& state0);
// The same recurrence as a raw-pointer CPU kernel with its own backward, which keeps one state every 16 steps and
// recomputes the rest (memory O(T/16 D M + T (D + M)) per head instead of O(T D M)); float32 and float64. On other
// devices it runs the chunked form.
RecurrenceResult decay_recurrence_fused(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                        const torch::Tensor& log_a, const torch::Tensor& log_b,
                                        const torch::Tensor& state0);
// The same recurrence through the fused recurrent CUDA kernel (kernels/decay/cuda/fused.h), the GPU twin of the
// fused CPU kernel, with the same memory-lean backward; CUDA float32 / float64 tensors, M <= 128, libtorch's
// default stream. Throws where fwlab was built without CUDA (cuda_kernels_built() says which).
RecurrenceResult decay_recurrence_cuda_fused(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                             const torch::Tensor& log_a, const torch::Tensor& log_b,
                                             const torch::Tensor& state0);
bool cuda_kernels_built();
// The same recurrence through the chunked CUDA kernel (kernels/decay/cuda/chunks.h): chunks of 64 steps whose
// products run on tensor cores for bfloat16 / float16 inputs (fp32 accumulation), states, gates and their sums in
// fp32 (fp64 for fp64 inputs); the backward recomputes the chunk-start states instead of keeping any S_t. q, k, v
// share a dtype (k and v are cast to q's); the final state is fp32 (fp64). Throws without a CUDA build.
RecurrenceResult decay_recurrence_cuda_chunked(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                               const torch::Tensor& log_a, const torch::Tensor& log_b,
                                               const torch::Tensor& state0);
// Whether the chunked CUDA kernel can take these q [.., M] and v [.., D] on their GPU (its shared memory per block
// grows with D, M and the dtype); false without a CUDA build.
bool cuda_chunks_fit(const torch::Tensor& q, const torch::Tensor& v);
// The chunked kernel's block programs run on the host, for CPU float32 / float64 tensors: the same preparation,
// arithmetic and gate gradients, so the tests bind it to the naive twin where no GPU is (slow; tests only). Each
// block runs on `threads_per_block` threads meeting at its barriers, as on the GPU.
RecurrenceResult decay_recurrence_chunks_host(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                              const torch::Tensor& log_a, const torch::Tensor& log_b,
                                              const torch::Tensor& state0, int threads_per_block = 1);
// The same chunked algebra on the CPU around BLAS products (kernels/decay/chunk_cpu.h): the chunked kernel's binding
// with programs that scan sub-chunks of 16 steps, the state's reads and writes as matrix products, the pairs inside
// a sub-chunk summed exactly. float32 and float64 (16-bit inputs widened); without BLAS symbols in the process
// (chunk_cpu_available()) it runs the fused CPU kernel.
RecurrenceResult decay_recurrence_chunk_cpu(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                            const torch::Tensor& log_a, const torch::Tensor& log_b,
                                            const torch::Tensor& state0);
// What a model runs, chosen by the tensors' device: a single token without gradients off the CPU -> its one-token
// step (kernels/common/recurrent_step.h); CUDA -> the chunked CUDA kernel (where built and its shared memory fits:
// cuda_chunks_fit); CPU -> the fused CPU kernel or the chunked one around BLAS, whichever measured
// faster for the shape class (kernels/decay/form_race.h); otherwise the libtorch chunked form with `chunk` steps.
// bfloat16 / float16 inputs stay so on CUDA (mixed precision) and are widened to float32 elsewhere.
RecurrenceResult decay_recurrence(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const torch::Tensor& log_a, const torch::Tensor& log_b, const torch::Tensor& state0,
                                  int64_t chunk);
// One step of the same recurrence; q, k: [B, H, M]; v, log_a: [B, H, D] (or [B, H, 1]); log_b: [B, H, M].
RecurrenceResult decay_recurrence_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const torch::Tensor& log_a, const torch::Tensor& log_b,
                                       const torch::Tensor& state);

}  // namespace fwlab::kernels

// Sequence kernels of the fast-weight and SRU mixers. Each fast form has a plain per-timestep twin (suffix
// _naive) written as a loop of libtorch ops; tests bind the two in float64, outputs and gradients.
// All functions are device-agnostic: results follow the inputs' device and dtype.
#pragma once

#include <torch/torch.h>

namespace fwlab::kernels {

// Whether a backward can follow: grad mode is on and some defined input requires a gradient (the forms that keep
// nothing for a backward, or race without one, ask this).
inline bool gradients_needed(std::initializer_list<torch::Tensor> inputs) {
  if (!torch::GradMode::is_enabled()) return false;
  for (const auto& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

struct RecurrenceResult {
  torch::Tensor y;      // outputs
  torch::Tensor state;  // final state (for step-by-step continuation and state-norm monitoring)
};

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
// bfloat16 / float16 tensors as float32, others unchanged: the dtype of gates, states and the CPU kernels under
// mixed precision (the matrix products around them stay in low precision).
torch::Tensor widened_to_fp32(const torch::Tensor& x);
// What a model runs, chosen by the tensors' device: CUDA -> the chunked CUDA kernel (where built and its shared
// memory fits: cuda_chunks_fit); CPU -> the fused CPU kernel or the chunked one around BLAS, whichever measured
// faster for the shape class (kernels/decay/form_race.h); otherwise the libtorch chunked form with `chunk` steps.
// bfloat16 / float16 inputs stay so on CUDA (mixed precision) and are widened to float32 elsewhere.
RecurrenceResult decay_recurrence(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const torch::Tensor& log_a, const torch::Tensor& log_b, const torch::Tensor& state0,
                                  int64_t chunk);
// One step of the same recurrence; q, k: [B, H, M]; v, log_a: [B, H, D] (or [B, H, 1]); log_b: [B, H, M].
RecurrenceResult decay_recurrence_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const torch::Tensor& log_a, const torch::Tensor& log_b,
                                       const torch::Tensor& state);

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

// The chunkwise-parallel forms of the delta rule and the gated delta rule (kernels/gated_delta/chunk_libtorch.cpp):
// within chunks of `chunk` steps dense matrix products (a triangular solve, Q K^T, the state's reads and writes),
// across chunks a recurrence C times shorter; the backward keeps the chunk-start states only. libtorch ops, so any
// device and dtype (alpha > 0: an alpha of exactly 0 is taken as float's smallest normal number).
RecurrenceResult delta_recurrence_chunked(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                          const torch::Tensor& beta, const torch::Tensor& state0, int64_t chunk);
RecurrenceResult gated_delta_recurrence_chunked(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                                const torch::Tensor& alpha, const torch::Tensor& beta,
                                                const torch::Tensor& state0, int64_t chunk);

// The same chunked forms as a raw-loop CPU kernel around BLAS products (kernels/gated_delta/chunk_cpu.cpp), with
// its own backward that keeps the chunk-start states and recomputes each chunk's preparation; alpha undefined is
// the delta rule. float32 and float64 (16-bit inputs are widened); on other devices, or where the process has no
// BLAS symbols to call (chunk_cpu_available()), it runs gated_delta_recurrence_chunked.
RecurrenceResult gated_delta_recurrence_chunk_cpu(const torch::Tensor& q, const torch::Tensor& k,
                                                  const torch::Tensor& v, const torch::Tensor& alpha,
                                                  const torch::Tensor& beta, const torch::Tensor& state0,
                                                  int64_t chunk);
bool chunk_cpu_available();

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

// SRU elementwise recurrence with highway (Lei et al. 2018, 2021):
//   f_t = sigmoid(U1_t + v_f * c_{t-1} + b_f),  r_t = sigmoid(U2_t + v_r * c_{t-1} + b_r)
//   c_t = f_t * c_{t-1} + (1 - f_t) * U0_t,     h_t = r_t * c_t + (1 - r_t) * x_t
// u: [B, T, 3, D] (blocks U0, U1, U2); x: [B, T, D]; v_f, v_r, b_f, b_r: [D]; c0: [B, D] or undefined.
// Returns h [B, T, D] and c_T [B, D]. The fused form is a raw-pointer CPU kernel with its own backward (it
// falls back to the naive loop on other devices).
RecurrenceResult sru_recurrence_fused(const torch::Tensor& u, const torch::Tensor& x, const torch::Tensor& v_f,
                                      const torch::Tensor& v_r, const torch::Tensor& b_f, const torch::Tensor& b_r,
                                      const torch::Tensor& c0);
RecurrenceResult sru_recurrence_naive(const torch::Tensor& u, const torch::Tensor& x, const torch::Tensor& v_f,
                                      const torch::Tensor& v_r, const torch::Tensor& b_f, const torch::Tensor& b_r,
                                      const torch::Tensor& c0);

}  // namespace fwlab::kernels

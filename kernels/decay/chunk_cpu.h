// The chunked decay recurrence's programs on the CPU around BLAS products (kernels/common/cpu_blas.h): the same problem
// and outputs as the chunked CUDA kernel's block programs (kernels/decay/cuda/chunks.h, whose binding in
// chunk_cuda.cpp pads the problem, adds the diagonal pair and derives the gates' gradients), computed per head as a
// scan over sub-chunks of 16 steps. Per sub-chunk from t0, with alpha_t = a_t0 ... a_t and beta_t likewise (the
// gates' running products from the sub-chunk's start: every factor <= 1, no division), and S its start state:
//   y_t  = alpha_t * (S (beta_t * q_t)) + sum_{s<t} P_ts (alpha_t / alpha_s) * v_s,
//   P_ts = sum_j q_tj k_sj beta_tj / beta_sj,
//   S'   = alpha_e * S * beta_e + sum_s ((alpha_e / alpha_s) * v_s) ((beta_e / beta_s) * k_s)^T,
// the ratios being the running products between s and t. The state's reads and writes are BLAS products; the pairs
// inside a sub-chunk are summed exactly in plain loops. The backward recomputes the sub-chunk states from the
// chunk-start ones and walks back: dS = alpha_e * dS' * beta_e + sum_t (alpha_t * dy_t)(beta_t * q_t)^T, with
//   dq_t = beta_t * (S^T (alpha_t * dy_t)) + sum_{s<t} R_ts (beta_t / beta_s) * k_s,  R_ts = sum_i dy_ti v_si ...
//   dk_s = (beta_e / beta_s) * (dS'^T ((alpha_e / alpha_s) * v_s)) + sum_{t>s} R_ts (beta_t / beta_s) * q_t,
//   dv_s = (alpha_e / alpha_s) * (dS' ((beta_e / beta_s) * k_s)) + sum_{t>s} P_ts (alpha_t / alpha_s) * dy_t.
#pragma once

#include "kernels/decay/cuda/chunks.h"

namespace fwlab::kernels::decay_blas {

// The gates of each step, e^{log a_t} [heads, steps, a_width] and e^{log b_t} [heads, steps, M] (null: no gate),
// beside the problem's chunk sums (which these programs do not read).
template <typename T>
struct StepGates {
  const T *a = nullptr, *b = nullptr;
};

// y without the diagonal pair [heads, steps, D], and the state at every chunk start [heads, chunks + 1, D, M].
template <typename T>
void forward(const cuda::ChunkProblem<T, T>& p, StepGates<T> gates, T* y, T* states);

// The chunk-start states again, their gradients (dstates[.., 0]: of state0), and dq, dk, dv without the diagonal.
template <typename T>
void backward(const cuda::ChunkProblem<T, T>& p, StepGates<T> gates, T* states, T* dstates, T* dq, T* dk, T* dv);

}  // namespace fwlab::kernels::decay_blas

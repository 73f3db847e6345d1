// The chunked CPU kernels' matrix products (kernels/delta/chunk_cpu.cpp, kernels/decay/chunk_cpu.cpp): many
// small ones a chunk (16 x 64 x 64, 64 x 64 x 16, 32 x 16 x 64 ...), every operand already in the L1 cache.
// OpenBLAS's AVX2 kernels (its Haswell and Zen cores) pack both operands into buffers, scale C in a pass of its own
// and take a buffer from a pool for every such product; measured on an AVX2 EPYC, that overhead made them 1.2-2x
// slower than this file's register tiles, which read the operands in place. OpenBLAS's AVX-512 core has small-matrix
// kernels without packing (measured at 0.8 us for 16 x 64 x 64, near that machine's peak): there the BLAS runs.
#pragma once

#include <cstdint>

#include "kernels/common/cpu_isa.h"

namespace fwlab::kernels {

// C (m x n) = alpha op(A) op(B) + beta C, row-major with leading dimensions, op(X) = X^T where the flag is set (the
// BLAS's contract; beta = 0 never reads C). float: this file's AVX2 tiles on a CPU with AVX2 and FMA but not
// AVX-512, the BLAS otherwise; double: the BLAS. The plain twin below where the process has no BLAS.
template <typename T>
void small_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

// float with the path named: CpuIsa::avx2 (the register tiles) or CpuIsa::plain (the twin); one the CPU lacks, or
// avx512 (no such path: the BLAS's kernels run there), is refused with std::invalid_argument.
void small_gemm_with(CpuIsa isa, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The twin: each element a dot product accumulated in double.
template <typename T>
void small_gemm_plain(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                      const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += static_cast<double>(trans_a ? a[p * lda + i] : a[i * lda + p]) *
             (trans_b ? b[j * ldb + p] : b[p * ldb + j]);
      const double old = beta == T(0) ? 0.0 : static_cast<double>(beta) * c[i * ldc + j];
      c[i * ldc + j] = static_cast<T>(static_cast<double>(alpha) * s + old);
    }
}

}  // namespace fwlab::kernels

// Row-major BLAS products for the CPU kernels, through the BLAS that libtorch itself loaded: the Fortran symbols
// sgemm_/dgemm_, found at run time (dlsym) rather than linked, so that fwlab builds against any
// libtorch. Debian's libtorch loads OpenBLAS; a libtorch whose BLAS symbols are hidden (one with MKL linked in
// statically) has none, and the callers then run their libtorch form (available() says which).
// Called from inside at::parallel_for, OpenBLAS's OpenMP build runs each product on the calling thread.
#pragma once

#include <cstdint>

namespace fwlab::kernels::blas {

bool available();

// C (m x n) = alpha op(A) op(B) + beta C, every matrix row-major with its leading dimension; op(X) = X^T where
// the flag is set. float and double.
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc);

}  // namespace fwlab::kernels::blas

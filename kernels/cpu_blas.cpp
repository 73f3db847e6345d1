#include "kernels/cpu_blas.h"

#include <dlfcn.h>

#include <type_traits>

#include <stdexcept>

namespace fwlab::kernels::blas {

namespace {

template <typename T>
using Gemm = void (*)(const char*, const char*, const int*, const int*, const int*, const T*, const T*, const int*,
                      const T*, const int*, const T*, T*, const int*);
template <typename T>
using Trsm = void (*)(const char*, const char*, const char*, const char*, const int*, const int*, const T*, const T*,
                      const int*, T*, const int*);

struct Symbols {
  Gemm<float> sgemm = reinterpret_cast<Gemm<float>>(dlsym(RTLD_DEFAULT, "sgemm_"));
  Gemm<double> dgemm = reinterpret_cast<Gemm<double>>(dlsym(RTLD_DEFAULT, "dgemm_"));
  Trsm<float> strsm = reinterpret_cast<Trsm<float>>(dlsym(RTLD_DEFAULT, "strsm_"));
  Trsm<double> dtrsm = reinterpret_cast<Trsm<double>>(dlsym(RTLD_DEFAULT, "dtrsm_"));
};

const Symbols& symbols() {
  static const Symbols s;
  return s;
}

template <typename T>
Gemm<T> gemm_symbol() {
  if constexpr (std::is_same_v<T, float>)
    return symbols().sgemm;
  else
    return symbols().dgemm;
}

template <typename T>
Trsm<T> trsm_symbol() {
  if constexpr (std::is_same_v<T, float>)
    return symbols().strsm;
  else
    return symbols().dtrsm;
}

}  // namespace

bool available() {
  const auto& s = symbols();
  return s.sgemm && s.dgemm && s.strsm && s.dtrsm;
}

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the same flags, the operands swapped.
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (!available()) throw std::logic_error("blas::gemm: no BLAS symbols in this process");
  const char ta = trans_a ? 'T' : 'N', tb = trans_b ? 'T' : 'N';
  const int M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(k);
  const int LDA = static_cast<int>(lda), LDB = static_cast<int>(ldb), LDC = static_cast<int>(ldc);
  gemm_symbol<T>()(&tb, &ta, &N, &M, &K, &alpha, b, &LDB, a, &LDA, &beta, c, &LDC);
}

// Row-major L X = B is column-major X^T L^T = B^T, where the array of L read column-major is L^T (upper): a solve
// from the right with that upper matrix, transposed again for L^T X = B.
template <typename T>
void unit_lower_solve(bool transposed, int64_t c, int64_t w, const T* L, int64_t ldl, T* B, int64_t ldb) {
  if (c == 0 || w == 0) return;
  if (!available()) throw std::logic_error("blas::unit_lower_solve: no BLAS symbols in this process");
  const char side = 'R', uplo = 'U', trans = transposed ? 'T' : 'N', diag = 'U';
  const int W = static_cast<int>(w), C = static_cast<int>(c), LDL = static_cast<int>(ldl), LDB = static_cast<int>(ldb);
  const T one = 1;
  trsm_symbol<T>()(&side, &uplo, &trans, &diag, &W, &C, &one, L, &LDL, B, &LDB);
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                          float, float*, int64_t);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t, const double*,
                           int64_t, double, double*, int64_t);
template void unit_lower_solve<float>(bool, int64_t, int64_t, const float*, int64_t, float*, int64_t);
template void unit_lower_solve<double>(bool, int64_t, int64_t, const double*, int64_t, double*, int64_t);

}  // namespace fwlab::kernels::blas

#include "kernels/common/cpu_blas.h"

#include <dlfcn.h>

#include <type_traits>

#include <stdexcept>

namespace fwlab::kernels::blas {

namespace {

template <typename T>
using Gemm = void (*)(const char*, const char*, const int*, const int*, const int*, const T*, const T*, const int*,
                      const T*, const int*, const T*, T*, const int*);

struct Symbols {
  Gemm<float> sgemm = reinterpret_cast<Gemm<float>>(dlsym(RTLD_DEFAULT, "sgemm_"));
  Gemm<double> dgemm = reinterpret_cast<Gemm<double>>(dlsym(RTLD_DEFAULT, "dgemm_"));
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

}  // namespace

bool available() {
  const auto& s = symbols();
  return s.sgemm && s.dgemm;
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

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                          float, float*, int64_t);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t, const double*,
                           int64_t, double, double*, int64_t);

}  // namespace fwlab::kernels::blas

#include "kernels/common/small_gemm_cpu.h"

#include <stdexcept>
#include <type_traits>
#include <vector>

#include "kernels/common/cpu_blas.h"
#include "kernels/common/transpose_cpu.h"
#include "kernels/common/vector_clones.h"

namespace fwlab::kernels {

namespace {

// W floats in one vector register (GCC's vector extension: the AVX2 function below compiles it to ymm registers).
template <int W>
struct FloatsOf {
  typedef float type __attribute__((vector_size(W * sizeof(float))));
};
template <int W>
using Floats = typename FloatsOf<W>::type;

// Unaligned; through a reference (a vector returned by value would be a -Wpsabi warning outside the AVX2 function).
template <int W>
FWLAB_HOT void load(Floats<W>& v, const float* p) {
  __builtin_memcpy(&v, p, sizeof v);
}

// op(A) (m x k) read in place: element (i, p) at a[i * row + p * col], so that A^T costs nothing.
struct Operand {
  const float* a;
  int64_t lda;
  bool trans;
  int64_t row() const { return trans ? 1 : lda; }
  int64_t col() const { return trans ? lda : 1; }
  Operand from_row(int64_t i) const { return {a + i * row(), lda, trans}; }
};

// R rows x V vectors of C held in registers for the whole sum over k: each step loads V vectors of B's row p and
// broadcasts R elements of A's column p (R V fused multiply-adds). R = 6, V = 2: 12 accumulators, what two FMA
// units of four cycles' latency need to stay busy, with 16 registers.
template <int W, int R, int V>
FWLAB_HOT void tile(int64_t k, Operand A, const float* b, int64_t ldb, float* c, int64_t ldc, float alpha, float beta) {
  Floats<W> acc[R][V] = {};
  const int64_t a_row = A.row(), a_col = A.col();
  for (int64_t p = 0; p < k; ++p) {
    Floats<W> row[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) load<W>(row[v], b + p * ldb + v * W);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float s = A.a[r * a_row + p * a_col];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[r][v] += s * row[v];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      Floats<W> out = alpha * acc[r][v], old;
      if (beta != 0) load<W>(old, c + r * ldc + v * W), out += beta * old;
      __builtin_memcpy(c + r * ldc + v * W, &out, sizeof out);
    }
}

// One panel of V W columns, all m rows: tiles of 6 rows, then one of the 1-5 left.
template <int W, int V>
FWLAB_HOT void panel(int64_t m, int64_t k, Operand A, const float* b, int64_t ldb, float* c, int64_t ldc, float alpha,
                     float beta) {
  int64_t i = 0;
  for (; i + 6 <= m; i += 6) tile<W, 6, V>(k, A.from_row(i), b, ldb, c + i * ldc, ldc, alpha, beta);
  const Operand rest = A.from_row(i);
  c += i * ldc;
  switch (m - i) {
    case 5:
      return tile<W, 5, V>(k, rest, b, ldb, c, ldc, alpha, beta);
    case 4:
      return tile<W, 4, V>(k, rest, b, ldb, c, ldc, alpha, beta);
    case 3:
      return tile<W, 3, V>(k, rest, b, ldb, c, ldc, alpha, beta);
    case 2:
      return tile<W, 2, V>(k, rest, b, ldb, c, ldc, alpha, beta);
    case 1:
      return tile<W, 1, V>(k, rest, b, ldb, c, ldc, alpha, beta);
    default:
      return;
  }
}

// Panels of 2 W columns, then one of W, then the last n mod W columns by the twin (rare: the chunk kernels' widths
// are multiples of 8 but for a last short chunk).
template <int W>
FWLAB_HOT void tiled(int64_t m, int64_t n, int64_t k, float alpha, Operand A, const float* b, int64_t ldb, float beta,
                     float* c, int64_t ldc) {
  int64_t j = 0;
  for (; j + 2 * W <= n; j += 2 * W) panel<W, 2>(m, k, A, b + j, ldb, c + j, ldc, alpha, beta);
  for (; j + W <= n; j += W) panel<W, 1>(m, k, A, b + j, ldb, c + j, ldc, alpha, beta);
  if (j < n) small_gemm_plain(A.trans, false, m, n - j, k, alpha, A.a, A.lda, b + j, ldb, beta, c + j, ldc);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) void tiled_avx2(int64_t m, int64_t n, int64_t k, float alpha, Operand A,
                                                    const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  tiled<8>(m, n, k, alpha, A, b, ldb, beta, c, ldc);
}
#endif

// op(B) = B^T as B itself for the tiles: transposed into this thread's scratch.
const float* as_rows(bool trans_b, int64_t n, int64_t k, const float* b, int64_t& ldb) {
  if (!trans_b) return b;
  thread_local std::vector<float> scratch;
  if (scratch.size() < static_cast<size_t>(k * n)) scratch.resize(k * n);
  transpose_cpu(n, k, b, ldb, scratch.data(), n);
  ldb = n;
  return scratch.data();
}

// The path, unchecked.
void small_gemm_on(CpuIsa isa, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
#if defined(__x86_64__) && defined(__GNUC__)
  if (isa == CpuIsa::avx2) {
    const float* rows = as_rows(trans_b, n, k, b, ldb);
    return tiled_avx2(m, n, k, alpha, {a, lda, trans_a}, rows, ldb, beta, c, ldc);
  }
#endif
  small_gemm_plain(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// Where float products run: the tiles on a CPU with AVX2 and FMA but not AVX-512 (OpenBLAS packs there), the BLAS
// on one with AVX-512 (its small-matrix kernels); without a BLAS, the tiles where the CPU has AVX2, else the twin.
enum class FloatRoute { tiles, blas, plain };
FloatRoute float_route() {
  static const FloatRoute route = [] {
    if (cpu_has(CpuIsa::avx2) && (!cpu_has(CpuIsa::avx512) || !blas::available())) return FloatRoute::tiles;
    return blas::available() ? FloatRoute::blas : FloatRoute::plain;
  }();
  return route;
}

}  // namespace

void small_gemm_with(CpuIsa isa, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (isa == CpuIsa::avx512 || !cpu_has(isa))
    throw std::invalid_argument("small_gemm_with: no path for the instruction set named on this CPU");
  small_gemm_on(isa, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <typename T>
void small_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  const FloatRoute route = std::is_same_v<T, float> ? float_route()
                           : blas::available()      ? FloatRoute::blas
                                                    : FloatRoute::plain;
  if (route == FloatRoute::blas) return blas::gemm<T>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if constexpr (std::is_same_v<T, float>)
    if (route == FloatRoute::tiles)
      return small_gemm_on(CpuIsa::avx2, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  small_gemm_plain(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template void small_gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                                int64_t, float, float*, int64_t);
template void small_gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t, const double*,
                                 int64_t, double, double*, int64_t);

}  // namespace fwlab::kernels

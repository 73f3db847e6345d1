// kernels/common/small_gemm_cpu.h: the AVX2 register tiles (where the CPU has them) against the plain twin, at the
// chunk kernels' shapes and at ones that leave every edge (rows past the 6-row tiles, columns past the 8- and 16-wide
// panels), each of the four op(A) op(B) forms, leading dimensions wider than the matrices, beta 0 / 1 / 0.5; the twin
// itself against libtorch's matmul in float64; beta = 0 never reading C.
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/common/small_gemm_cpu.h"

namespace K = fwlab::kernels;

namespace {

struct GemmShape {
  int64_t m, n, k;
};

std::vector<float> gemm_operand(size_t count, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  std::vector<float> out(count);
  for (auto& x : out) x = normal(gen);
  return out;
}

}  // namespace

TEST_CASE("small_gemm's AVX2 tiles == the plain twin: shapes, op forms, leading dimensions, alpha and beta",
          "[kernels]") {
  if (!K::cpu_has(K::CpuIsa::avx2)) {
    CHECK_THROWS_AS(
        K::small_gemm_with(K::CpuIsa::avx2, false, false, 1, 1, 1, 1, nullptr, 1, nullptr, 1, 0, nullptr, 1),
        std::invalid_argument);
    return;
  }
  const std::vector<GemmShape> shapes{{16, 64, 64}, {64, 64, 16}, {32, 16, 64}, {16, 128, 16}, {13, 37, 11},
                                      {1, 1, 1},    {7, 24, 5},   {6, 8, 0},    {40, 48, 16},  {5, 3, 9}};
  for (const auto& s : shapes)
    for (const bool ta : {false, true})
      for (const bool tb : {false, true})
        for (const float beta : {0.0f, 1.0f, 0.5f})
          DYNAMIC_SECTION(s.m << " x " << s.n << " x " << s.k << (ta ? " A^T" : "") << (tb ? " B^T" : "") << " beta "
                              << beta) {
            const int64_t lda = (ta ? s.m : s.k) + 3, ldb = (tb ? s.k : s.n) + 2, ldc = s.n + 5;
            const auto a = gemm_operand((ta ? s.k : s.m) * lda + 1, 1), b = gemm_operand((tb ? s.n : s.k) * ldb + 1, 2);
            auto fast = gemm_operand(s.m * ldc, 3), slow = fast;
            K::small_gemm_with(K::CpuIsa::avx2, ta, tb, s.m, s.n, s.k, -1.5f, a.data(), lda, b.data(), ldb, beta,
                               fast.data(), ldc);
            K::small_gemm_plain(ta, tb, s.m, s.n, s.k, -1.5f, a.data(), lda, b.data(), ldb, beta, slow.data(), ldc);
            double worst = 0;
            for (int64_t i = 0; i < s.m; ++i)
              for (int64_t j = 0; j < ldc; ++j) {
                const int64_t at = i * ldc + j;
                if (j >= s.n) REQUIRE(fast[at] == slow[at]);  // the padding right of C untouched
                worst = std::max(worst, static_cast<double>(std::fabs(fast[at] - slow[at])));
              }
            CHECK(worst <= 2e-5 * (1 + std::sqrt(static_cast<double>(s.k))) * 4);
          }
}

TEST_CASE("small_gemm: the twin is libtorch's matmul in float64; beta = 0 ignores what C held", "[kernels]") {
  const int64_t m = 9, n = 20, k = 14;
  auto A = torch::randn({k, m}, torch::kFloat64), B = torch::randn({n, k}, torch::kFloat64);
  const auto expected = -2.0 * torch::matmul(A.t(), B.t());
  std::vector<double> c(m * n, std::numeric_limits<double>::quiet_NaN());
  K::small_gemm_plain(true, true, m, n, k, -2.0, A.data_ptr<double>(), m, B.data_ptr<double>(), k, 0.0, c.data(), n);
  CHECK(torch::allclose(torch::from_blob(c.data(), {m, n}, torch::kFloat64), expected, 1e-12, 1e-12));
  for (const auto isa : {K::CpuIsa::plain, K::CpuIsa::avx2}) {
    if (!K::cpu_has(isa)) continue;
    auto A32 = A.to(torch::kFloat32), B32 = B.to(torch::kFloat32);
    std::vector<float> c32(m * n, std::numeric_limits<float>::quiet_NaN());
    K::small_gemm_with(isa, true, true, m, n, k, -2.0f, A32.data_ptr<float>(), m, B32.data_ptr<float>(), k, 0.0f,
                       c32.data(), n);
    CHECK(torch::allclose(torch::from_blob(c32.data(), {m, n}, torch::kFloat32).to(torch::kFloat64), expected, 1e-5,
                          1e-5));
  }
  CHECK_THROWS_AS(
      K::small_gemm_with(K::CpuIsa::avx512, false, false, 1, 1, 1, 1, nullptr, 1, nullptr, 1, 0, nullptr, 1),
      std::invalid_argument);
}

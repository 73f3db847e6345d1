// kernels/common/transpose_cpu.h: the AVX-512 16 x 16 and AVX2 8 x 8 blocks (each this CPU has) and the edges they
// leave against the element-by-element twin, for sizes below, at and across the blocks, with leading dimensions wider
// than the matrices; double through the twin; an instruction set the CPU lacks refused.
#include <catch2/catch.hpp>

#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "kernels/common/transpose_cpu.h"

namespace K = fwlab::kernels;

TEST_CASE("transpose_cpu == the element-by-element transpose, every instruction set the CPU has", "[kernels]") {
  for (const auto isa : {K::CpuIsa::plain, K::CpuIsa::avx2, K::CpuIsa::avx512})
    for (const auto& [rows, cols] :
         {std::pair<int64_t, int64_t>{1, 1}, {3, 17}, {8, 8}, {16, 16}, {17, 33}, {64, 64}, {40, 48}})
      DYNAMIC_SECTION("isa " << static_cast<int>(isa) << ", " << rows << " x " << cols) {
        const int64_t ld_in = cols + 3, ld_out = rows + 5;
        std::vector<float> in(rows * ld_in);
        std::iota(in.begin(), in.end(), 1.0f);  // every element distinct: a misplaced one shows
        std::vector<float> fast(cols * ld_out, -1.0f), slow(fast);
        K::transpose_plain(rows, cols, in.data(), ld_in, slow.data(), ld_out);
        CHECK(slow[(cols - 1) * ld_out + rows - 1] == in[(rows - 1) * ld_in + cols - 1]);
        try {
          K::transpose_cpu_with(isa, rows, cols, in.data(), ld_in, fast.data(), ld_out);
        } catch (const std::invalid_argument&) {
          CHECK(static_cast<int>(isa) > static_cast<int>(K::widest_cpu_isa()));  // refused only where it is lacking
          continue;
        }
        CHECK(fast == slow);
      }
}

TEST_CASE("transpose_cpu: the best instruction set for float, the twin for double", "[kernels]") {
  const int64_t rows = 33, cols = 20;
  std::vector<double> in(rows * cols);
  std::iota(in.begin(), in.end(), 1.0);
  std::vector<double> fast(cols * rows, -1.0), slow(fast);
  K::transpose_cpu(rows, cols, in.data(), cols, fast.data(), rows);
  K::transpose_plain(rows, cols, in.data(), cols, slow.data(), rows);
  CHECK(fast == slow);
  std::vector<float> in32(in.begin(), in.end()), fast32(cols * rows, -1.0f), slow32(fast32);
  K::transpose_cpu(rows, cols, in32.data(), cols, fast32.data(), rows);
  K::transpose_plain(rows, cols, in32.data(), cols, slow32.data(), rows);
  CHECK(fast32 == slow32);
}

// kernels/transpose_cpu.h: the AVX-512 16 x 16 blocks and the edges they leave against the element-by-element
// twin, for sizes below, at and across the block, with leading dimensions wider than the matrices.
#include <catch2/catch.hpp>

#include <cstdint>
#include <numeric>
#include <vector>

#include "kernels/transpose_cpu.h"

namespace K = fwlab::kernels;

TEST_CASE("transpose_cpu == the element-by-element transpose, float and double", "[kernels]") {
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {3, 17}, {16, 16}, {17, 33}, {64, 64}, {40, 48}})
    DYNAMIC_SECTION(rows << " x " << cols) {
      const int64_t ld_in = cols + 3, ld_out = rows + 5;
      std::vector<float> in(rows * ld_in);
      std::iota(in.begin(), in.end(), 1.0f);  // every element distinct: a misplaced one shows
      std::vector<float> fast(cols * ld_out, -1.0f), slow(fast);
      K::transpose_cpu(rows, cols, in.data(), ld_in, fast.data(), ld_out);
      K::transpose_plain(rows, cols, in.data(), ld_in, slow.data(), ld_out);
      CHECK(fast == slow);
      CHECK(slow[(cols - 1) * ld_out + rows - 1] == in[(rows - 1) * ld_in + cols - 1]);
      std::vector<double> in64(in.begin(), in.end()), fast64(cols * ld_out, -1.0), slow64(fast64);
      K::transpose_cpu(rows, cols, in64.data(), ld_in, fast64.data(), ld_out);
      K::transpose_plain(rows, cols, in64.data(), ld_in, slow64.data(), ld_out);
      CHECK(fast64 == slow64);
    }
}

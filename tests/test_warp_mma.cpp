// The warp-level tensor-core product (kernels/cuda/warp_mma.h) on the host: its fragment layout against the PTX
// ISA's table ("Matrix Fragments for mma.m16n8k16 with floating point type"), products of whole warps against a
// plain loop, and the delta family's tensor-core outputs program (kernels/delta/cuda/chunks_mma.h) against
// the plain program it replaces, in float64, float32 and bfloat16, with sizes that leave partial tiles.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "kernels/cuda/host_half.h"
#include "kernels/delta/cuda/chunks_host.h"

namespace C = fwlab::cuda;

namespace {

// The ISA's table, written out for three lanes: lane 0 (group 0, place 0), lane 5 (group 1, place 1), lane 31
// (group 7, place 3); A's elements a0..a7, B's b0..b3 as (row k, column n), C's c0..c3.
struct LaneTable {
  int lane;
  std::pair<int, int> a[8], b[4], c[4];
};
const LaneTable kTable[] = {
    {0,
     {{0, 0}, {0, 1}, {8, 0}, {8, 1}, {0, 8}, {0, 9}, {8, 8}, {8, 9}},
     {{0, 0}, {1, 0}, {8, 0}, {9, 0}},
     {{0, 0}, {0, 1}, {8, 0}, {8, 1}}},
    {5,
     {{1, 2}, {1, 3}, {9, 2}, {9, 3}, {1, 10}, {1, 11}, {9, 10}, {9, 11}},
     {{2, 1}, {3, 1}, {10, 1}, {11, 1}},
     {{1, 2}, {1, 3}, {9, 2}, {9, 3}}},
    {31,
     {{7, 6}, {7, 7}, {15, 6}, {15, 7}, {7, 14}, {7, 15}, {15, 14}, {15, 15}},
     {{6, 7}, {7, 7}, {14, 7}, {15, 7}},
     {{7, 6}, {7, 7}, {15, 6}, {15, 7}}},
};

// C [m, n] = A [m, depth] B [depth, n] by the warps of one host block, tile by tile, zeros past the edges.
template <typename In>
std::vector<double> warp_product(const std::vector<double>& A, const std::vector<double>& B, int64_t m, int64_t depth,
                                 int64_t n, int threads, bool transpose_a_fragment = false) {
  std::vector<double> out(size_t(m * n), std::nan(""));
  auto a = [&](int64_t r, int64_t k) { return r < m && k < depth ? float(A[r * depth + k]) : 0.0f; };
  auto b = [&](int64_t k, int64_t c) { return k < depth && c < n ? float(B[k * n + c]) : 0.0f; };
  auto a_t = [&](int64_t r, int64_t k) { return a(k, r); };
  const int64_t row_tiles = (m + 15) / 16, col_tiles = (n + 7) / 8;
  C::run_block(threads, [&](const C::BlockCtx& ctx) {
    for (int64_t tile = ctx.warp(); tile < row_tiles * col_tiles; tile += ctx.warps()) {
      const int64_t r0 = tile / col_tiles * 16, c0 = tile % col_tiles * 8;
      C::FragC<double> acc;
      for (int64_t k0 = 0; k0 < depth; k0 += 16) {
        const auto fa =
            transpose_a_fragment ? C::load_a<In>(ctx.lane(), k0, r0, a_t) : C::load_a<In>(ctx.lane(), r0, k0, a);
        C::mma(ctx, fa, C::load_b<In>(ctx.lane(), k0, c0, b), acc);
      }
      for (int i = 0; i < 4; ++i) {
        const int64_t r = r0 + C::mma_c_row(ctx.lane(), i), c = c0 + C::mma_c_col(ctx.lane(), i);
        if (r < m && c < n) out[size_t(r * n + c)] = acc.x[i];
      }
    }
  });
  return out;
}

std::vector<double> drawn(size_t count, std::mt19937& gen) {
  std::normal_distribution<double> normal;
  std::vector<double> out(count);
  for (auto& x : out) x = normal(gen);
  return out;
}

double worst_gap(const std::vector<double>& got, const std::vector<double>& want) {
  double gap = 0, scale = 1e-6;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::fabs(got[i] - want[i]);
    gap = std::isnan(d) ? INFINITY : std::max(gap, d), scale = std::max(scale, std::fabs(want[i]));
  }
  return gap / scale;
}

}  // namespace

TEST_CASE("warp mma: the fragment layout is the PTX ISA's m16n8k16 table", "[kernels]") {
  for (const auto& row : kTable) {
    INFO("lane " << row.lane);
    for (int i = 0; i < 8; ++i) CHECK(std::make_pair(C::mma_a_row(row.lane, i), C::mma_a_col(row.lane, i)) == row.a[i]);
    for (int i = 0; i < 4; ++i) {
      CHECK(std::make_pair(C::mma_b_row(row.lane, i), C::mma_b_col(row.lane, i)) == row.b[i]);
      CHECK(std::make_pair(C::mma_c_row(row.lane, i), C::mma_c_col(row.lane, i)) == row.c[i]);
    }
  }
  // Every element of each operand belongs to exactly one (lane, element).
  std::set<std::pair<int, int>> a, b, c;
  for (int lane = 0; lane < C::kWarp; ++lane) {
    for (int i = 0; i < 8; ++i) a.insert({C::mma_a_row(lane, i), C::mma_a_col(lane, i)});
    for (int i = 0; i < 4; ++i)
      b.insert({C::mma_b_row(lane, i), C::mma_b_col(lane, i)}),
          c.insert({C::mma_c_row(lane, i), C::mma_c_col(lane, i)});
  }
  CHECK(a.size() == 16 * 16);
  CHECK(b.size() == 16 * 8);
  CHECK(c.size() == 16 * 8);
}

TEST_CASE("warp mma (host warps): products of whole warps equal a plain loop, partial tiles included", "[kernels]") {
  std::mt19937 gen(11);
  const int64_t m = 37, depth = 41, n = 21;  // neither a multiple of the tile: the accessors' zeros fill the edges
  const auto A = drawn(size_t(m * depth), gen), B = drawn(size_t(depth * n), gen);
  std::vector<double> want(size_t(m * n)), want_bf16(size_t(m * n));
  auto bf16 = [](double x) { return double(C::convert<float>(C::convert<C::HostBf16>(float(x)))); };
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < n; ++c)
      for (int64_t k = 0; k < depth; ++k) {
        want[size_t(r * n + c)] += double(float(A[r * depth + k])) * double(float(B[k * n + c]));
        want_bf16[size_t(r * n + c)] += bf16(A[r * depth + k]) * bf16(B[k * n + c]);
      }
  CHECK(worst_gap(warp_product<double>(A, B, m, depth, n, 64), want) < 1e-12);
  CHECK(worst_gap(warp_product<C::HostBf16>(A, B, m, depth, n, 96), want_bf16) < 1e-6);
  // The check can fail: A's fragments loaded as A^T (a layout with row and column swapped) give another product.
  CHECK(worst_gap(warp_product<double>(A, B, m, depth, n, 64, true), want) > 0.1);
}

namespace {

// A delta-family problem of one head and two chunks in the kernel's own buffers (q, k, v in In; the rest Acc),
// drawn as the rules are fed: unit keys and queries, beta in (0, 1), gates sigmoid(N + 2), a state.
template <typename In, typename Acc>
struct DeltaBuffers {
  int64_t heads = 1, steps = 2 * C::kChunk, D, M;
  std::vector<In> q, k, v;
  std::vector<Acc> beta, log_alpha, state0, g, W, U, u;

  DeltaBuffers(int64_t D_, int64_t M_, bool gated, std::mt19937& gen) : D(D_), M(M_) {
    auto unit_rows = [&](int64_t width) {
      auto x = drawn(size_t(heads * steps * width), gen);
      for (size_t r = 0; r < x.size(); r += size_t(width)) {
        double norm = 0;
        for (int64_t j = 0; j < width; ++j) norm += x[r + j] * x[r + j];
        for (int64_t j = 0; j < width; ++j) x[r + j] /= std::sqrt(norm);
      }
      return rounded<In>(x);
    };
    q = unit_rows(M), k = unit_rows(M), v = rounded<In>(drawn(size_t(heads * steps * D), gen));
    for (double x : drawn(size_t(heads * steps), gen)) beta.push_back(Acc(1 / (1 + std::exp(-x))));
    if (gated)
      for (double x : drawn(size_t(heads * steps), gen)) log_alpha.push_back(Acc(-std::log1p(std::exp(-x - 2))));
    for (double x : drawn(size_t(heads * D * M), gen)) state0.push_back(Acc(x));
    g.resize(size_t(heads * steps)), W.resize(size_t(heads * steps * M));
    U.resize(size_t(heads * steps * D)), u.resize(U.size());
  }
  template <typename T>
  static std::vector<T> rounded(const std::vector<double>& x) {
    std::vector<T> out;
    for (double e : x) out.push_back(C::convert<T>(Acc(e)));
    return out;
  }
  C::delta::Problem<In, Acc> problem() {
    C::delta::Problem<In, Acc> p;
    p.q = q.data(), p.k = k.data(), p.v = v.data(), p.beta = beta.data();
    p.log_alpha = log_alpha.empty() ? nullptr : log_alpha.data(), p.state0 = state0.data();
    p.g = g.data(), p.W = W.data(), p.U = U.data(), p.u = u.data();
    p.heads = heads, p.steps = steps, p.D = D, p.M = M;
    return p;
  }
  // y of the plain program (one thread) or of the tensor-core one (`threads`, whole warps).
  std::vector<double> outputs(bool tensor_cores, int threads) {
    std::vector<Acc> y(size_t(heads * steps * D)), states(size_t(heads * 3 * D * M));
    C::delta::forward_on_host(problem(), y.data(), states.data(), threads, tensor_cores);
    return std::vector<double>(y.begin(), y.end());
  }
};

template <typename In, typename Acc>
double mma_outputs_gap(int64_t D, int64_t M, bool gated, int threads) {
  std::mt19937 gen(uint32_t(D * 131 + M * 7 + gated));
  DeltaBuffers<In, Acc> b(D, M, gated, gen);
  return worst_gap(b.outputs(true, threads), b.outputs(false, 1));
}

}  // namespace

TEST_CASE("delta chunk outputs on tensor cores (host warps) equal the plain program", "[kernels]") {
  for (const bool gated : {true, false}) {
    INFO("gated " << gated);
    // Partial tiles on both sides (D = 20: 8-column tiles; M = 12: one 16-deep step, zero-filled) and a full size.
    CHECK(mma_outputs_gap<double, double>(20, 12, gated, 64) < 1e-12);
    CHECK(mma_outputs_gap<double, double>(64, 64, gated, 64) < 1e-12);
    CHECK(mma_outputs_gap<double, double>(20, 12, gated, 256) < 1e-12);  // the GPU's 8 warps
    CHECK(mma_outputs_gap<float, float>(24, 40, gated, 96) < 1e-5);
  }
  // bfloat16 operands round the state, u and the scores as the GPU does (fp32 accumulation): within bf16's
  // tolerance of the plain program's fp32 products, not equal to them.
  const double bf16_gap = mma_outputs_gap<C::HostBf16, float>(32, 32, true, 64);
  CHECK(bf16_gap < 2e-2);
  CHECK(bf16_gap > 1e-5);
}

TEST_CASE("delta chunk outputs on tensor cores (host warps): a block of part of a warp is refused", "[kernels]") {
  std::mt19937 gen(3);
  DeltaBuffers<double, double> b(16, 16, true, gen);
  CHECK_THROWS_WITH(b.outputs(true, 48), Catch::Contains("whole warps of 32 threads"));
}

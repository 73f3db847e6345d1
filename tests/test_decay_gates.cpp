// The chunked decay kernel's gate programs (kernels/decay/cuda/gates.h) run as the host runs them, against libtorch
// in float64: the log-gates summed from each chunk's start, and a gate's gradient as a reverse running sum over the
// whole sequence. Both run in fp32 on GPUs; compensated sums are what keep fp32 at fp64's answer rounded once, and
// the checks below are tight enough that plain fp32 sums (measured beside them) miss them.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "kernels/cuda/host_half.h"
#include "kernels/decay/cuda/diagonal.h"
#include "kernels/decay/cuda/gates.h"
#include "tests/test_util.h"

namespace C = fwlab::cuda;

namespace {

// |a - b| over max |b|.
double relative_gap(const torch::Tensor& a, const torch::Tensor& b) {
  const auto x = a.to(torch::kFloat64), y = b.to(torch::kFloat64);
  return (x - y).abs().max().item<double>() / y.abs().max().item<double>();
}

// The largest |a - b| in units of fp32's spacing at |b| (2^-23 |b|, relative), over the elements where b is not 0.
double worst_ulps(const torch::Tensor& a, const torch::Tensor& b) {
  const auto x = a.to(torch::kFloat64), y = b.to(torch::kFloat64), nonzero = y != 0;
  return ((x - y).abs() / (y.abs() * std::ldexp(1.0, -23))).masked_select(nonzero).max().item<double>();
}

// sum_{t >= r} x_t along dim 1 of [heads, T, w].
torch::Tensor reverse_cumsum(const torch::Tensor& x) { return x.flip(1).cumsum(1).flip(1); }

// A running sum along dim `dim` of a float32 tensor in float32, one rounding per term as a plain loop has (libtorch's
// CPU cumsum accumulates float in double), backwards with `reverse`.
torch::Tensor plain_fp32_cumsum(const torch::Tensor& x, int64_t dim, bool reverse) {
  auto sums = torch::empty_like(x);
  auto running = torch::zeros_like(x.select(dim, 0));
  for (int64_t i = 0; i < x.size(dim); ++i) {
    const int64_t at = reverse ? x.size(dim) - 1 - i : i;
    running = running + x.select(dim, at);  // an elementwise fp32 add: rounded once
    sums.select(dim, at).copy_(running);
  }
  return sums;
}

template <typename Program>
void for_items(int64_t count, const Program& item) {
  for (int64_t i = 0; i < count; ++i) item(i);
}

}  // namespace

TEST_CASE("decay gate sums: each chunk's running sum of floored log-gates, in fp32 to fp64's answer", "[kernels]") {
  torch::manual_seed(5);
  const int64_t heads = 3, T = 200, width = 5, out_width = 16, chunks = (T + C::kChunk - 1) / C::kChunk;
  auto log_gate = torch::log_sigmoid(torch::randn({heads, T, width}, torch::kFloat64) * 3 + 1);
  log_gate.index_put_({1, 70, 2}, -std::numeric_limits<double>::infinity());  // a gate of 0
  const auto x32 = log_gate.to(torch::kFloat32).contiguous();
  auto out = torch::full({heads, chunks * C::kChunk, out_width}, std::nan(""), torch::kFloat32);
  C::GateSumArgs a;
  a.log_gate = x32.data_ptr(), a.out = out.data_ptr(), a.heads = heads, a.T = T, a.width = width;
  a.chunks = chunks, a.out_width = out_width, a.floor = -110.0;
  const C::GateSums<float> sums{a};
  for_items(sums.items(), [&](int64_t i) { sums.run(i); });

  // float64 from the same fp32 inputs, floored, padded with zeros, summed inside each chunk.
  const auto floored = x32.to(torch::kFloat64).clamp_min(-110.0);
  const auto padded = torch::constant_pad_nd(floored, {0, out_width - width, 0, chunks * C::kChunk - T});
  const auto want = padded.reshape({heads, chunks, C::kChunk, out_width}).cumsum(2).reshape(out.sizes());
  const auto plain =
      plain_fp32_cumsum(padded.to(torch::kFloat32).reshape({heads, chunks, C::kChunk, out_width}), 2, false);
  const double ours = worst_ulps(out, want), theirs = worst_ulps(plain.reshape(out.sizes()), want);
  INFO("worst error in fp32 ulps of the exact sum: compensated " << ours << ", plain fp32 cumsum " << theirs);
  CHECK(torch::isfinite(out).all().item<bool>());
  CHECK(ours <= 1.0);  // rounded once (at most half an ulp), give or take the compensation's own rounding
  CHECK(theirs > 2.0);
  const auto floor_step = out.index({1, 70, 2}) - out.index({1, 69, 2});  // the gate of 0, inside chunk 1
  CHECK(floor_step.item<double>() == Approx(-110.0).margin(1e-4));
  CHECK(out.narrow(2, width, out_width - width).abs().max().item<double>() == 0.0);  // padded columns: gate 1
}

// The three passes of a gate's gradient as GPU threads run them: one column of one (head, chunk) or head at a time.
template <typename In>
void gradients_by_thread(const C::GateGradientArgs& a) {
  const C::GateGradients<In, float> g{a};
  const int64_t N = g.chunks(), w = a.out_width;
  float sum, lost;
  for_items(g.chunk_items(), [&](int64_t i) { g.chunk_totals(i / w / N, i / w % N, i % w, 1, &sum, &lost); });
  for_items(g.column_items(), [&](int64_t i) { g.later_chunks(i / w, i % w, 1, &sum, &lost); });
  for_items(g.chunk_items(), [&](int64_t i) { g.step_sums(i / w / N, i / w % N, i % w, 1, &sum, &lost); });
}

// The same as the binding's host loops run them: all of a chunk's columns at once (vectorised).
template <typename In>
void gradients_by_chunk(const C::GateGradientArgs& a) {
  const C::GateGradients<In, float> g{a};
  const int64_t N = g.chunks(), w = a.out_width;
  std::vector<float> sums(static_cast<size_t>(w)), losts(static_cast<size_t>(w));
  for_items(a.heads * N, [&](int64_t i) { g.chunk_totals(i / N, i % N, 0, w, sums.data(), losts.data()); });
  for_items(a.heads, [&](int64_t h) { g.later_chunks(h, 0, w, sums.data(), losts.data()); });
  for_items(a.heads * N, [&](int64_t i) { g.step_sums(i / N, i % N, 0, w, sums.data(), losts.data()); });
}

TEST_CASE("decay gate gradients: reverse running sums over T = 8150 in fp32 match float64, per column and shared",
          "[kernels]") {
  torch::manual_seed(6);
  // Rows of 24 columns (the padded width) of which a gate per column reads 20; 42 steps of padding in the last chunk,
  // holding values that must count nothing.
  const int64_t heads = 2, T = 8150, steps = 8192, width = 24;
  auto opt = torch::TensorOptions().dtype(torch::kFloat32);
  auto rows = [&] { return torch::randn({heads, steps, width}, opt); };
  const auto y1 = rows() + 0.3, y2 = rows();
  for (bool shared : {false, true}) {
    // Per column: fp32 inputs and the final state's term. Shared (a gate the columns share): bf16 inputs, no final
    // state gradient.
    DYNAMIC_SECTION((shared ? "shared, bf16 inputs" : "per column, fp32 inputs")) {
      const int64_t out_width = shared ? 1 : 20;
      const auto x1 = rows().to(shared ? torch::kBFloat16 : torch::kFloat32), x2 = rows().to(x1.scalar_type());
      const auto final_term = shared ? torch::Tensor() : torch::randn({heads, out_width}, opt);
      auto out = torch::full({heads, T, out_width}, std::nan(""), opt);
      auto totals = torch::empty({heads, steps / C::kChunk, out_width}, opt);
      C::GateGradientArgs a;
      a.x1 = x1.data_ptr(), a.x2 = x2.data_ptr(), a.y1 = y1.data_ptr(), a.y2 = y2.data_ptr();
      a.final_term = shared ? nullptr : final_term.data_ptr(), a.totals = totals.data_ptr(), a.out = out.data_ptr();
      a.heads = heads, a.T = T, a.steps = steps, a.width = width, a.out_width = out_width;
      shared ? gradients_by_thread<C::HostBf16>(a) : gradients_by_thread<float>(a);

      auto d = [](const torch::Tensor& x) { return x.to(torch::kFloat64).narrow(1, 0, 8150); };
      auto terms = d(x1) * d(y1) - d(x2) * d(y2);
      terms = shared ? terms.sum(2, true) : terms.narrow(2, 0, out_width).clone();
      if (!shared) terms.select(1, T - 1).add_(final_term.to(torch::kFloat64));  // the final term, at the last step
      const auto want = reverse_cumsum(terms);
      const auto plain = plain_fp32_cumsum(terms.to(torch::kFloat32), 1, true);  // fp32 along the sequence
      INFO("compensated fp32 gap " << relative_gap(out, want) << ", plain fp32 gap " << relative_gap(plain, want));
      CHECK(torch::isfinite(out).all().item<bool>());
      CHECK(relative_gap(out, want) <= 4e-7);                          // mostly the fp32 rounding of each product
      CHECK(relative_gap(plain, want) > relative_gap(out, want) * 4);  // a tolerance plain fp32 would miss

      // The host's order gives the same bits as a GPU thread's.
      const auto by_thread = out.clone();
      out.fill_(std::nan(""));
      shared ? gradients_by_chunk<C::HostBf16>(a) : gradients_by_chunk<float>(a);
      CHECK(torch::equal(out, by_thread));
    }
  }
}

TEST_CASE("decay gate gradients: a sum that reaches inf stays inf (not inf - inf = NaN in the compensation)",
          "[kernels]") {
  float sum = 1.0f, lost = 0.0f;
  C::compensated_add(sum, lost, 3.0e38f);
  C::compensated_add(sum, lost, 3.0e38f);  // past fp32's largest: inf
  C::compensated_add(sum, lost, -1.0f);
  CHECK(std::isinf(sum + lost));
}

TEST_CASE("decay diagonal pair: y, dq, dk and dv leave the padded layout with (q.k) v and its gradients added",
          "[kernels]") {
  torch::manual_seed(7);
  // T 70 of 128 padded steps, D 20 of 32 columns, M 12 of 16: the padding holds values that must not be read.
  const int64_t heads = 3, T = 70, steps = 128, D = 20, Dp = 32, M = 12, Mp = 16;
  auto opt = torch::TensorOptions().dtype(torch::kFloat32);
  const auto q = torch::randn({heads, steps, Mp}, opt), k = torch::randn({heads, steps, Mp}, opt);
  const auto v = torch::randn({heads, steps, Dp}, opt), dy = torch::randn({heads, steps, Dp}, opt);
  const auto y_off = torch::randn({heads, steps, Dp}, opt), dv_off = torch::randn({heads, steps, Dp}, opt);
  const auto dq_off = torch::randn({heads, steps, Mp}, opt), dk_off = torch::randn({heads, steps, Mp}, opt);
  auto y = torch::full({heads, T, D}, std::nan(""), opt), dv = torch::full({heads, T, D}, std::nan(""), opt);
  auto dq = torch::full({heads, T, M}, std::nan(""), opt), dk = torch::full({heads, T, M}, std::nan(""), opt);
  C::DiagonalArgs a;
  a.q = q.data_ptr(), a.k = k.data_ptr(), a.v = v.data_ptr(), a.dy = dy.data_ptr(), a.y_off = y_off.data_ptr();
  a.dq_off = dq_off.data_ptr(), a.dk_off = dk_off.data_ptr(), a.dv_off = dv_off.data_ptr(), a.y = y.data_ptr();
  a.dq = dq.data_ptr(), a.dk = dk.data_ptr(), a.dv = dv.data_ptr();
  a.heads = heads, a.T = T, a.steps = steps, a.D = D, a.M = M, a.Dp = Dp, a.Mp = Mp;
  const C::Diagonal<float, float> diagonal{a};
  for_items(diagonal.items(), [&](int64_t i) { diagonal.forward(i); });
  for_items(diagonal.items(), [&](int64_t i) { diagonal.backward(i); });

  // float64, from the rows and columns that count.
  auto d = [&](const torch::Tensor& x, int64_t w) { return x.to(torch::kFloat64).narrow(1, 0, T).narrow(2, 0, w); };
  const auto qk = (d(q, M) * d(k, M)).sum(2, true), dyv = (d(dy, D) * d(v, D)).sum(2, true);
  CHECK(relative_gap(y, d(y_off, D) + qk * d(v, D)) <= 1e-6);
  CHECK(relative_gap(dq, d(dq_off, M) + dyv * d(k, M)) <= 1e-6);
  CHECK(relative_gap(dk, d(dk_off, M) + dyv * d(q, M)) <= 1e-6);
  CHECK(relative_gap(dv, d(dv_off, D) + qk * d(dy, D)) <= 1e-6);
}

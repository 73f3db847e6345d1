// The chunked CUDA kernel's block programs run on the host (decay_recurrence_chunks_host) at the edges a GPU user
// meets first: gates of exactly 0, fp16 states past 65,504, bf16 gate gradients over T = 8192, many threads per
// block; the final state's storage; and whether every shape the GPU tests use fits an A100's shared memory. The
// reference is the naive per-timestep recurrence in float64, fed the same rounded inputs.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "kernels/decay/cuda/chunks.h"
#include "kernels/decay/decay.h"
#include "tests/gpu/chunked_cases.h"
#include "tests/test_util.h"

namespace K = fwlab::kernels;
using fwlab::test::DecayInputs;

namespace {

DecayInputs random_inputs(int64_t B, int64_t H, int64_t T, int64_t M, int64_t D, bool value_gate, bool key_gate) {
  auto opt = torch::TensorOptions().dtype(torch::kFloat64);
  auto gate = [&](int64_t w) { return torch::log_sigmoid(torch::randn({B, H, T, w}, opt) + 2.0); };
  DecayInputs in{torch::randn({B, H, T, M}, opt) / std::sqrt(double(M)),
                 torch::randn({B, H, T, M}, opt) / std::sqrt(double(M)),
                 torch::randn({B, H, T, D}, opt),
                 {},
                 {},
                 torch::randn({B, H, D, M}, opt)};
  if (value_gate) in.log_a = gate(D);
  if (key_gate) in.log_b = gate(M);
  return in;
}

// Leaves of dtype (gates and state in fp32, as the kernel keeps them; fp64 for fp64).
DecayInputs leaves(const DecayInputs& in, torch::ScalarType dtype) {
  const auto wide = dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  auto leaf = [&](const torch::Tensor& t, torch::ScalarType d) {
    return t.defined() ? t.detach().to(d).requires_grad_(true) : t;
  };
  return {leaf(in.q, dtype),    leaf(in.k, dtype),    leaf(in.v, dtype),
          leaf(in.log_a, wide), leaf(in.log_b, wide), leaf(in.state0, wide)};
}

struct Outcome {
  torch::Tensor y, state;
  std::vector<torch::Tensor> grads;  // of q, k, v, log_a, log_b, state0 (the defined ones)
};

template <typename F>
Outcome differentiate(const DecayInputs& in, const torch::Tensor& gy, const torch::Tensor& gs, F recurrence) {
  auto r = recurrence(in);
  auto loss = (r.y.to(torch::kFloat64) * gy).sum() + (r.state.to(torch::kFloat64) * gs).sum();
  return {r.y, r.state, torch::autograd::grad({loss}, in.all())};
}

// |a - b| over max |b| (at least 1e-6).
double gap(const torch::Tensor& a, const torch::Tensor& b) {
  const auto x = a.detach().to(torch::kFloat64), y = b.detach().to(torch::kFloat64);
  return (x - y).abs().max().item<double>() / std::max(1e-6, y.abs().max().item<double>());
}

// The host run in `dtype` (threads per block) against the float64 naive twin on the same rounded inputs, with
// upstream gradients N(0, upstream^2).
Outcome host_vs_naive(const DecayInputs& in64, torch::ScalarType dtype, int threads, Outcome* reference = nullptr,
                      double upstream = 1.0) {
  const auto fast_in = leaves(in64, dtype), slow_in = leaves(fast_in, torch::kFloat64);  // the rounding both see
  const auto probe =
      K::decay_recurrence_naive(slow_in.q, slow_in.k, slow_in.v, slow_in.log_a, slow_in.log_b, slow_in.state0);
  const auto gy = torch::randn_like(probe.y) * upstream, gs = torch::randn_like(probe.state) * upstream;
  auto slow = differentiate(slow_in, gy, gs, [](const DecayInputs& i) {
    return K::decay_recurrence_naive(i.q, i.k, i.v, i.log_a, i.log_b, i.state0);
  });
  auto fast = differentiate(fast_in, gy, gs, [&](const DecayInputs& i) {
    return K::decay_recurrence_chunks_host(i.q, i.k, i.v, i.log_a, i.log_b, i.state0, threads);
  });
  if (reference) *reference = slow;
  return fast;
}

void check_close(const Outcome& fast, const Outcome& slow, double tolerance) {
  CHECK(gap(fast.y, slow.y) <= tolerance);
  CHECK(gap(fast.state, slow.state) <= tolerance);
  for (size_t i = 0; i < slow.grads.size(); ++i) {
    INFO("gradient " << i << " of the defined inputs (q, k, v, log_a, log_b, state0): gap "
                     << gap(fast.grads[i], slow.grads[i]));
    CHECK(torch::isfinite(fast.grads[i]).all().item<bool>());
    CHECK(gap(fast.grads[i], slow.grads[i]) <= tolerance);
  }
}

}  // namespace

TEST_CASE("chunked kernel on the host: gates of exactly 0 (log -inf) forget as the recurrence does, float64",
          "[kernels]") {
  torch::manual_seed(41);
  auto in = random_inputs(1, 2, 150, 8, 12, true, true);
  {
    torch::NoGradGuard no_grad;
    const double inf = std::numeric_limits<double>::infinity();
    for (int64_t t : {0, 20, 21, 64, 100})
      in.log_a.select(2, t).narrow(2, 0, 5).fill_(-inf);            // some rows, mid-chunk and at a chunk start
    for (int64_t t : {30, 127}) in.log_b.select(2, t).fill_(-inf);  // every key column: the state resets
  }
  Outcome slow;
  const auto fast = host_vs_naive(in, torch::kFloat64, 3, &slow);
  REQUIRE(torch::isfinite(slow.y).all().item<bool>());
  REQUIRE(torch::isfinite(fast.y).all().item<bool>());
  check_close(fast, slow, 1e-10);
}

TEST_CASE("chunked kernel on the host: fp16 staging of an additive state past 65,504 stays finite and right",
          "[kernels]") {
  // No decay: S_T = sum_t v_t k_t^T grows with T. With v ~ 100 and k ~ 1.8 the state passes fp16's 65,504 after
  // ~400 steps; q and the upstream gradients are small so that y and dq = S^T dy themselves stay inside fp16 (the
  // dtype autograd returns them in). Staged as fp16 unscaled, the state would be inf and so would y.
  torch::manual_seed(42);
  const int64_t T = 1000, M = 16, D = 16;
  auto opt = torch::TensorOptions().dtype(torch::kFloat64);
  DecayInputs in{torch::rand({1, 1, T, M}, opt) * 0.01,
                 torch::rand({1, 1, T, M}, opt) + 1.3,
                 torch::rand({1, 1, T, D}, opt) * 10 + 95.0,
                 {},
                 {},
                 {}};
  Outcome slow;
  const auto fast = host_vs_naive(in, torch::kFloat16, 2, &slow, 0.01);
  REQUIRE(slow.state.abs().max().item<double>() > 65504.0 * 2);
  REQUIRE(slow.y.abs().max().item<double>() < 65504.0);
  check_close(fast, slow, 2e-2);
}

TEST_CASE("chunked kernel on the host: bf16 gate gradients over T = 8192 against float64", "[kernels_long]") {
  // The gates' gradients are running sums over the whole sequence of terms made from the bf16-staged products.
  torch::manual_seed(43);
  const auto in = random_inputs(1, 1, 8192, 16, 16, true, true);
  Outcome slow;
  const auto fast = host_vs_naive(in, torch::kBFloat16, 1, &slow);
  const size_t log_a = 3, log_b = 4;  // q, k, v, log_a, log_b, state0
  INFO("dlog_a gap " << gap(fast.grads[log_a], slow.grads[log_a]) << ", dlog_b gap "
                     << gap(fast.grads[log_b], slow.grads[log_b]));
  CHECK(gap(fast.grads[log_a], slow.grads[log_a]) <= 2e-2);
  CHECK(gap(fast.grads[log_b], slow.grads[log_b]) <= 2e-2);
  CHECK(gap(fast.y, slow.y) <= 2e-2);
}

TEST_CASE("chunked kernel on the host: 32 threads per block (a warp) meeting at the barriers, float64", "[kernels]") {
  torch::manual_seed(44);
  Outcome slow;
  const auto fast = host_vs_naive(random_inputs(1, 1, 70, 20, 24, true, true), torch::kFloat64, 32, &slow);
  check_close(fast, slow, 1e-11);
}

TEST_CASE("chunked kernel: the final state owns its storage (the chunk-start states are freed)", "[kernels]") {
  torch::manual_seed(45);
  const auto in = random_inputs(2, 2, 300, 16, 16, true, true);
  const auto r = K::decay_recurrence_chunks_host(in.q, in.k, in.v, in.log_a, in.log_b, in.state0);
  const auto bytes = r.state.numel() * int64_t(r.state.element_size());
  CHECK(r.state.is_contiguous());
  CHECK(int64_t(r.state.storage().nbytes()) == bytes);  // not a view into the [heads, chunks + 1, D, M] buffer
}

TEST_CASE("chunked kernel: every shape the GPU tests call it with fits an A100's and an H100's shared memory",
          "[kernels]") {
  namespace C = fwlab::cuda;
  for (const auto& call : fwlab::test::chunked_test_calls()) {
    const int64_t D = C::round16(call.shape.D), M = C::round16(call.shape.M);
    const int64_t bytes = call.dtype == torch::kFloat64   ? C::Scratch<double, double>::bytes(D, M)
                          : call.dtype == torch::kFloat32 ? C::Scratch<float, float>::bytes(D, M)
                                                          : C::Scratch<uint16_t, float>::bytes(D, M);
    INFO(c10::toString(call.dtype) << " M=" << call.shape.M << " D=" << call.shape.D << ": " << bytes << " bytes");
    CHECK(bytes <= fwlab::test::kSharedBytesSm80);
    CHECK(bytes <= fwlab::test::kSharedBytesSm90);
  }
  // And the check can fail: fp64 at D = M = 64 (the old sweep shape) needs 192 KiB.
  CHECK(C::Scratch<double, double>::bytes(64, 64) > fwlab::test::kSharedBytesSm80);
}

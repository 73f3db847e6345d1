// The delta family's chunked CUDA kernel's block programs run on the host (gated_delta_recurrence_chunks_host)
// against the per-timestep recurrence in float64: outputs, final state and the gradient of every input (q, k, v,
// alpha, beta, state0), for the gated delta rule and the delta rule, across chunk edges and padding, with gates near
// 0, D and M apart and wider than one scan block, and with several threads per block (a missing barrier or a read of
// unwritten scratch shows as a wrong result there).
#include <catch2/catch.hpp>

#include "kernels/delta/cuda_guard.h"
#include "kernels/delta/delta.h"
#include "models/gpt.h"
#include "tests/test_util.h"

namespace K = fwlab::kernels;

namespace {

struct Inputs {
  torch::Tensor q, k, v, alpha, beta, state0;  // alpha undefined: the delta rule
  std::vector<torch::Tensor> leaves() const {
    std::vector<torch::Tensor> out;
    for (const auto& t : {q, k, v, alpha, beta, state0})
      if (t.defined()) out.push_back(t);
    return out;
  }
};

// Keys and queries L2-normalised as the rules are fed. alpha: "random" (sigmoid(N + 2)), "near0" (~e^-40), "none".
// B = H = n (the tensor-core cases take one head: their host runs are slow).
Inputs draw(int64_t T, int64_t M, int64_t D, const std::string& alpha, bool with_state, torch::ScalarType dtype,
            int64_t n = 2) {
  auto opt = torch::TensorOptions().dtype(torch::kFloat64);
  namespace F = torch::nn::functional;
  auto unit = [&](int64_t w) {
    return F::normalize(torch::randn({n, n, T, w}, opt), F::NormalizeFuncOptions().dim(-1));
  };
  Inputs in{unit(M), unit(M), torch::randn({n, n, T, D}, opt), {}, torch::sigmoid(torch::randn({n, n, T, 1}, opt)), {}};
  if (alpha == "random") in.alpha = torch::sigmoid(torch::randn({n, n, T, 1}, opt) + 2.0);
  if (alpha == "near0") in.alpha = torch::exp(-40.0 - torch::rand({n, n, T, 1}, opt));
  if (with_state) in.state0 = torch::randn({n, n, D, M}, opt);
  const auto acc = dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  auto leaf = [](const torch::Tensor& t, torch::ScalarType d) {
    return t.defined() ? t.to(d).detach().requires_grad_(true) : t;
  };
  return {leaf(in.q, dtype),   leaf(in.k, dtype),  leaf(in.v, dtype),
          leaf(in.alpha, acc), leaf(in.beta, acc), leaf(in.state0, acc)};
}

Inputs widened(const Inputs& in) {  // the same rounded values in float64, fresh leaves
  auto w = [](const torch::Tensor& t) { return t.defined() ? t.detach().to(torch::kFloat64).requires_grad_(true) : t; };
  return {w(in.q), w(in.k), w(in.v), w(in.alpha), w(in.beta), w(in.state0)};
}

// y, the final state, then every leaf's gradient of a random projection of both.
std::vector<torch::Tensor> outcome(const Inputs& in, const K::RecurrenceResult& r, const torch::Tensor& gy,
                                   const torch::Tensor& gs) {
  const auto loss = (r.y.to(torch::kFloat64) * gy).sum() + (r.state.to(torch::kFloat64) * gs).sum();
  auto grads = torch::autograd::grad({loss}, in.leaves());
  grads.insert(grads.begin(), {r.y.detach(), r.state.detach()});
  return grads;
}

double gap(const torch::Tensor& a, const torch::Tensor& b) {
  const auto x = a.to(torch::kFloat64), y = b.to(torch::kFloat64);
  return (x - y).abs().max().item<double>() / std::max(1e-6, y.abs().max().item<double>());
}

void check_against_naive(const Inputs& in, int threads, double tolerance, bool tensor_cores = false) {
  const auto ref_in = widened(in);
  const auto ref =
      ref_in.alpha.defined()
          ? K::gated_delta_recurrence_naive(ref_in.q, ref_in.k, ref_in.v, ref_in.alpha, ref_in.beta, ref_in.state0)
          : K::delta_recurrence_naive(ref_in.q, ref_in.k, ref_in.v, ref_in.beta, ref_in.state0);
  const auto gy = torch::randn_like(ref.y), gs = torch::randn_like(ref.state);
  const auto want = outcome(ref_in, ref, gy, gs);
  const auto got = outcome(
      in, K::gated_delta_recurrence_chunks_host(in.q, in.k, in.v, in.alpha, in.beta, in.state0, threads, tensor_cores),
      gy, gs);
  REQUIRE(got.size() == want.size());
  const char* names[] = {"y", "state", "dq", "dk", "dv", "dalpha or dbeta", "dbeta or dstate0", "dstate0"};
  for (size_t n = 0; n < want.size(); ++n) {
    // alpha's gradient as the gradient of log alpha, which models hold: the kernel works with running log-gate sums,
    // and at alpha ~ e^-40 dividing d log alpha by alpha multiplies its rounding by e^40.
    const bool log_gate = n == 5 && in.alpha.defined();
    const auto a = log_gate ? got[n] * ref_in.alpha.detach() : got[n];
    const auto b = log_gate ? want[n] * ref_in.alpha.detach() : want[n];
    INFO(names[n] << ": gap " << gap(a, b));
    CHECK(gap(a, b) < tolerance);
  }
}

}  // namespace

TEST_CASE("delta chunks kernel (host run): outputs, state and every gradient equal the recurrence, float64",
          "[kernels]") {
  torch::manual_seed(7);
  for (const std::string alpha : {"random", "near0", "none"})
    for (const bool with_state : {false, true})
      for (const int64_t T : {1, 64, 150}) {
        INFO("alpha " << alpha << ", state " << with_state << ", T " << T);
        check_against_naive(draw(T, 12, 20, alpha, with_state, torch::kFloat64), 1, 1e-9);
      }
}

TEST_CASE("delta chunks kernel (host run): several threads per block give the same result", "[kernels]") {
  torch::manual_seed(8);
  for (const std::string alpha : {"random", "none"}) {
    INFO("alpha " << alpha);
    check_against_naive(draw(130, 20, 36, alpha, true, torch::kFloat64), 5, 1e-9);
  }
}

TEST_CASE("delta chunks kernel (host run): float32 and bfloat16 inputs within their tolerance", "[kernels]") {
  torch::manual_seed(9);
  check_against_naive(draw(100, 16, 16, "random", true, torch::kFloat32), 1, 1e-4);
  check_against_naive(draw(100, 16, 16, "random", true, torch::kBFloat16), 1, 2e-2);
}

TEST_CASE("delta chunks kernel (host run): the tensor-core programs give every gradient, float64, bf16 and fp16",
          "[kernels]") {
  // The programs bf16 and fp16 run on the GPU (kernels/delta/cuda/chunks_mma.h, chunk_gradients_mma.h), through the
  // host's warp emulation: in float64 they must equal the recurrence as the plain programs do; in bf16 and fp16 they
  // round the state, u, the pair matrices and dR for their products, within the 16-bit tolerance.
  torch::manual_seed(12);
  for (const std::string alpha : {"random", "near0", "none"}) {
    INFO("alpha " << alpha);
    check_against_naive(draw(100, 20, 12, alpha, true, torch::kFloat64, alpha == "random" ? 2 : 1), 64, 1e-9, true);
  }
  check_against_naive(draw(70, 64, 64, "random", true, torch::kFloat64, 1), 64, 1e-9, true);
  check_against_naive(draw(64, 12, 20, "random", true, torch::kFloat64, 1), 256, 1e-9, true);  // the GPU's 8 warps
  check_against_naive(draw(100, 32, 32, "random", true, torch::kBFloat16, 1), 64, 2e-2, true);
  check_against_naive(draw(100, 32, 32, "none", true, torch::kHalf, 1), 64, 2e-2, true);
  const auto q = torch::randn({1, 1, 4, 8}, torch::kFloat64), beta = torch::rand({1, 1, 4, 1}, torch::kFloat64);
  CHECK_THROWS_WITH(K::gated_delta_recurrence_chunks_host(q, q, q, {}, beta, {}, 48, true),
                    Catch::Contains("whole warps"));
}

TEST_CASE("delta chunks kernel (host run): refuses bad gate and state shapes", "[kernels]") {
  const auto q = torch::randn({2, 1, 4, 8}, torch::kFloat64), v = torch::randn({2, 1, 4, 8}, torch::kFloat64);
  const auto beta = torch::rand({2, 1, 4, 1}, torch::kFloat64);
  CHECK_THROWS_WITH(K::gated_delta_recurrence_chunks_host(q, q, v, {}, torch::rand({2, 1, 4, 8}), {}, 1),
                    Catch::Contains("beta must be [B, H, T, 1]"));
  // A state of one sequence for two would be read past its end by the kernel.
  CHECK_THROWS_WITH(K::gated_delta_recurrence_chunks_host(q, q, v, {}, beta, torch::zeros({1, 1, 8, 8}), 1),
                    Catch::Contains("state0 must be [B, H, D, M]"));
  CHECK_NOTHROW(K::gated_delta_recurrence_chunks_host(q, q, v, {}, beta, torch::zeros({2, 1, 8, 8}), 1));
}

TEST_CASE("delta chunks kernel (host run): every rule's model trains through it as through the reference kernels",
          "[kernels]") {
  // The model's own q, k, v, alpha, beta and states (their shapes, dtypes, conv and norms) through the kernel's
  // binding, as they will reach it on a GPU: loss and every parameter's gradient against the per-timestep kernels.
  torch::manual_seed(10);
  auto cfg = fwlab::test::every_rule_config();
  cfg.context = 128;  // 70 steps: a chunk and a padded one
  fwlab::GPT model(cfg);
  model->to(torch::kFloat64);
  const auto idx = torch::randint(0, 50, {2, 70}, torch::kLong);
  struct Routed {  // the hook off again however the case ends
    explicit Routed(bool on) { K::route_delta_to_host_kernel(on); }
    ~Routed() { K::route_delta_to_host_kernel(false); }
  };
  auto grads_of = [&](bool host_kernel) {
    model->set_reference_kernels(!host_kernel);
    const Routed routed(host_kernel);
    model->zero_grad();
    const auto loss = model->forward(idx).log_softmax(-1).select(-1, 3).mean();
    loss.backward();
    std::vector<torch::Tensor> out{loss.detach()};
    for (const auto& p : model->parameters()) out.push_back(p.grad().clone());
    return out;
  };
  const auto routed = grads_of(true), reference = grads_of(false);
  model->set_reference_kernels(false);
  for (size_t n = 0; n < routed.size(); ++n) {
    INFO("tensor " << n << " (0: the loss)");
    CHECK(gap(routed[n], reference[n]) < 1e-9);
  }
}

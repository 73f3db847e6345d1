// The gated delta rule's fused CPU kernel against its per-timestep twin in float64 (outputs, final state and the
// gradient of every input) around the 16-step segments, with gates near 0 and exactly 1; the twin against the
// rule's closed form S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T written with matrices; and
// step-by-step continuation against one pass.
#include <catch2/catch.hpp>

#include "kernels/delta/delta.h"
#include "tests/test_util.h"

namespace K = fwlab::kernels;
using fwlab::test::max_abs_diff;

namespace {

struct GatedDeltaInputs {
  torch::Tensor q, k, v, alpha, beta, state0;
  std::vector<torch::Tensor> all() const {
    std::vector<torch::Tensor> out{q, k, v, alpha, beta};
    if (state0.defined()) out.push_back(state0);
    return out;
  }
};

// alpha: "random" sigmoid-distributed, "near0" ~ e^-40, "one" exactly 1. Keys and queries L2-normalised as the
// gated delta rule feeds them.
GatedDeltaInputs make_inputs(int64_t T, const std::string& alpha, bool with_state, int64_t B = 2, int64_t H = 2,
                             int64_t M = 5, int64_t D = 6) {
  auto opt = torch::TensorOptions().dtype(torch::kFloat64);
  auto unit = [&](int64_t width) {
    return torch::nn::functional::normalize(torch::randn({B, H, T, width}, opt),
                                            torch::nn::functional::NormalizeFuncOptions().dim(-1));
  };
  GatedDeltaInputs in{
      unit(M), unit(M), torch::randn({B, H, T, D}, opt), {}, torch::sigmoid(torch::randn({B, H, T, 1}, opt)), {}};
  if (alpha == "near0")
    in.alpha = torch::exp(-40.0 - torch::rand({B, H, T, 1}, opt));
  else if (alpha == "one")
    in.alpha = torch::ones({B, H, T, 1}, opt);
  else
    in.alpha = torch::sigmoid(torch::randn({B, H, T, 1}, opt) + 2.0);
  if (with_state) in.state0 = torch::randn({B, H, D, M}, opt);
  for (auto* t : {&in.q, &in.k, &in.v, &in.alpha, &in.beta, &in.state0})
    if (t->defined()) t->requires_grad_(true);
  return in;
}

template <typename F>
std::vector<torch::Tensor> outputs_and_grads(const GatedDeltaInputs& in, const torch::Tensor& gy,
                                             const torch::Tensor& gs, F recurrence) {
  auto r = recurrence(in);
  auto loss = (r.y * gy).sum() + (r.state * gs).sum();
  const auto inputs = in.all();
  // allow_unused: the delta rule's forms do not read alpha (its gradient is then zero, for both twins alike).
  auto grads = torch::autograd::grad({loss}, inputs, {}, false, false, /*allow_unused=*/true);
  for (size_t n = 0; n < grads.size(); ++n)
    if (!grads[n].defined()) grads[n] = torch::zeros_like(inputs[n]);
  grads.insert(grads.begin(), {r.y, r.state});
  return grads;
}

}  // namespace

TEST_CASE("gated delta recurrence: fused CPU kernel == naive loop (outputs, state, gradients), float64", "[kernels]") {
  torch::manual_seed(61);
  const char* names[] = {"y", "state", "dq", "dk", "dv", "dalpha", "dbeta", "dstate0"};
  for (const std::string alpha : {"random", "near0", "one"})
    for (int64_t T : {1, 15, 16, 17, 53})
      for (bool with_state : {false, true}) {
        DYNAMIC_SECTION("alpha " << alpha << ", T=" << T << (with_state ? ", initial state" : ", zero state")) {
          const auto in = make_inputs(T, alpha, with_state);
          const auto probe = K::gated_delta_recurrence_naive(in.q, in.k, in.v, in.alpha, in.beta, in.state0);
          const auto gy = torch::randn_like(probe.y), gs = torch::randn_like(probe.state);
          const auto fast = outputs_and_grads(in, gy, gs, [](const GatedDeltaInputs& i) {
            return K::gated_delta_recurrence_fused(i.q, i.k, i.v, i.alpha, i.beta, i.state0);
          });
          const auto slow = outputs_and_grads(in, gy, gs, [](const GatedDeltaInputs& i) {
            return K::gated_delta_recurrence_naive(i.q, i.k, i.v, i.alpha, i.beta, i.state0);
          });
          REQUIRE(fast.size() == slow.size());
          for (size_t n = 0; n < fast.size(); ++n) {
            INFO(names[n]);
            CHECK(max_abs_diff(fast[n], slow[n]) <= 1e-11 * std::max(1.0, slow[n].abs().max().item<double>()));
          }
        }
      }
}

// The chunkwise-parallel forms (kernels/delta/chunk_libtorch.cpp, and chunk_cpu.cpp's kernel around BLAS)
// against the naive loops: chunk sizes that do and do not divide T, gates near 0 and exactly 1, with and without an
// initial state; the delta rule with alpha absent.
TEST_CASE("delta and gated delta recurrences: chunked form == naive loop (outputs, state, gradients), float64",
          "[kernels]") {
  torch::manual_seed(64);
  const char* names[] = {"y", "state", "dq", "dk", "dv", "dalpha", "dbeta", "dstate0"};
  for (const std::string form : {"libtorch", "cpu"})
    for (const std::string alpha : {"random", "near0", "one", "none"})
      for (int64_t chunk : {4, 16})
        for (int64_t T : {1, 15, 16, 17, 53})
          for (bool with_state : {false, true})
            DYNAMIC_SECTION(form << ": alpha " << alpha << ", chunk " << chunk << ", T=" << T
                                 << (with_state ? ", state" : "")) {
              const bool gated = alpha != "none";
              const auto in = make_inputs(T, gated ? alpha : "one", with_state);
              const auto probe = K::delta_recurrence_naive(in.q, in.k, in.v, in.beta, in.state0);
              const auto gy = torch::randn_like(probe.y), gs = torch::randn_like(probe.state);
              const auto fast = outputs_and_grads(in, gy, gs, [&](const GatedDeltaInputs& i) {
                if (form == "cpu")
                  return K::gated_delta_recurrence_chunk_cpu(i.q, i.k, i.v, gated ? i.alpha : torch::Tensor(), i.beta,
                                                             i.state0, chunk);
                return gated ? K::gated_delta_recurrence_chunked(i.q, i.k, i.v, i.alpha, i.beta, i.state0, chunk)
                             : K::delta_recurrence_chunked(i.q, i.k, i.v, i.beta, i.state0, chunk);
              });
              const auto slow = outputs_and_grads(in, gy, gs, [&](const GatedDeltaInputs& i) {
                return gated ? K::gated_delta_recurrence_naive(i.q, i.k, i.v, i.alpha, i.beta, i.state0)
                             : K::delta_recurrence_naive(i.q, i.k, i.v, i.beta, i.state0);
              });
              REQUIRE(fast.size() == slow.size());
              for (size_t n = 0; n < fast.size(); ++n) {
                INFO(names[n]);
                // alpha's gradient as the gradient of log alpha, which models hold (alpha = exp(...)): the chunked
                // form works with cumulative log-gates, and at alpha ~ e^-40 dividing d log alpha by alpha
                // multiplies its rounding by e^40.
                const auto f = n == 5 ? fast[n] * in.alpha : fast[n], s = n == 5 ? slow[n] * in.alpha : slow[n];
                CHECK(max_abs_diff(f, s) <= 1e-10 * std::max(1.0, s.abs().max().item<double>()));
              }
            }
}

// float32, as models run it, at widths whose transposed states fill the 16 x 16 blocks of
// kernels/common/transpose_cpu.h and leave edges (M = 40, D = 48; M = D = 64 as the bench), against the naive loop in
// float64.
TEST_CASE("delta and gated delta recurrences: chunk_cpu in float32 == naive loop in float64", "[kernels]") {
  torch::manual_seed(65);
  for (const auto& [M, D] : {std::pair<int64_t, int64_t>{40, 48}, {64, 64}})
    for (bool gated : {false, true}) DYNAMIC_SECTION("M=" << M << " D=" << D << (gated ? " gated" : " delta")) {
        const auto in = make_inputs(37, gated ? "random" : "one", true, 2, 2, M, D);
        GatedDeltaInputs single = in;
        for (auto* t : {&single.q, &single.k, &single.v, &single.alpha, &single.beta, &single.state0})
          *t = t->detach().to(torch::kFloat32).requires_grad_(true);
        const auto gy = torch::randn({2, 2, 37, D}, torch::kFloat64), gs = torch::randn({2, 2, D, M}, torch::kFloat64);
        const auto fast = outputs_and_grads(single, gy.to(torch::kFloat32), gs.to(torch::kFloat32), [&](const auto& i) {
          return K::gated_delta_recurrence_chunk_cpu(i.q, i.k, i.v, gated ? i.alpha : torch::Tensor(), i.beta, i.state0,
                                                     16);
        });
        const auto slow = outputs_and_grads(in, gy, gs, [&](const auto& i) {
          return K::gated_delta_recurrence_naive(i.q, i.k, i.v, i.alpha, i.beta, i.state0);
        });
        for (size_t n = 0; n < fast.size(); ++n) {
          if (n == 5 && !gated) continue;  // the delta rule reads no alpha (the twin's alpha is ones)
          INFO("output or gradient " << n);
          CHECK(max_abs_diff(fast[n].to(torch::kFloat64), slow[n]) <=
                2e-4 * std::max(1.0, slow[n].abs().max().item<double>()));
        }
      }
}

TEST_CASE("gated delta recurrence: the naive loop is the closed form S_t = alpha S (I - beta k k^T) + beta v k^T",
          "[kernels]") {
  torch::manual_seed(62);
  const auto in = make_inputs(9, "random", true, 1, 1, 4, 3);
  const auto r = K::gated_delta_recurrence_naive(in.q, in.k, in.v, in.alpha, in.beta, in.state0);
  auto S = in.state0[0][0].detach();
  const auto I = torch::eye(4, torch::kFloat64);
  for (int64_t t = 0; t < 9; ++t) {
    const auto k = in.k[0][0][t].detach().unsqueeze(1), v = in.v[0][0][t].detach().unsqueeze(1),
               q = in.q[0][0][t].detach();
    const double a = in.alpha[0][0][t][0].item<double>(), b = in.beta[0][0][t][0].item<double>();
    S = a * torch::matmul(S, I - b * torch::matmul(k, k.t())) + b * torch::matmul(v, k.t());
    CHECK(max_abs_diff(r.y[0][0][t], torch::matmul(S, q)) < 1e-12);
  }
  CHECK(max_abs_diff(r.state[0][0], S) < 1e-12);
}

TEST_CASE("gated delta recurrence: step-by-step continuation equals one pass; alpha = 1 is the delta rule",
          "[kernels]") {
  torch::manual_seed(63);
  const auto in = make_inputs(12, "random", false);
  const auto whole = K::gated_delta_recurrence_fused(in.q, in.k, in.v, in.alpha, in.beta, {});
  auto first = K::gated_delta_recurrence_fused(in.q.narrow(2, 0, 7), in.k.narrow(2, 0, 7), in.v.narrow(2, 0, 7),
                                               in.alpha.narrow(2, 0, 7), in.beta.narrow(2, 0, 7), {});
  auto S = first.state;
  for (int64_t t = 7; t < 12; ++t) {
    auto r = K::gated_delta_recurrence_step(in.q.select(2, t), in.k.select(2, t), in.v.select(2, t),
                                            in.alpha.select(2, t), in.beta.select(2, t), S);
    CHECK(max_abs_diff(r.y, whole.y.select(2, t)) < 1e-12);
    S = r.state;
  }
  CHECK(max_abs_diff(S, whole.state) < 1e-12);
  const auto ones = make_inputs(12, "one", false);
  const auto gated = K::gated_delta_recurrence_fused(ones.q, ones.k, ones.v, ones.alpha, ones.beta, {});
  const auto delta = K::delta_recurrence_naive(ones.q, ones.k, ones.v, ones.beta, {});
  CHECK(max_abs_diff(gated.y, delta.y) < 1e-12);
}

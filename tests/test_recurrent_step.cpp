// kernels/common/recurrent_step.h, the decode step off the CPU, checked where no GPU is: its libtorch form continues
// the naive recurrence of each family exactly, and keeps mixed precision's dtypes (y in the value dtype, the state in
// fp32). The CUDA kernel against this form: tests/gpu/test_gpu_step.cpp.
#include <catch2/catch.hpp>

#include "kernels/common/recurrent_step.h"
#include "kernels/decay/decay.h"
#include "kernels/delta/delta.h"
#include "tests/test_util.h"

using namespace fwlab;
namespace K = fwlab::kernels;
using fwlab::test::max_abs_diff;

namespace {

enum class Family { decay, gated, delta, gated_delta };

// T + 1 tokens of one family, [B, H, T + 1, .] in float64: decay log_a [.., D] and log_b [.., M]; gated a log_a of
// width 1 alone; delta beta; gated delta beta and alpha.
K::StepInputs sequence(Family family, int64_t T, int64_t D = 5, int64_t M = 7) {
  const auto opt = torch::TensorOptions().dtype(torch::kFloat64);
  K::StepInputs in{torch::randn({2, 3, T + 1, M}, opt),
                   torch::randn({2, 3, T + 1, M}, opt) * 0.3,
                   torch::randn({2, 3, T + 1, D}, opt),
                   {},
                   {},
                   {},
                   {},
                   {}};
  if (family == Family::delta || family == Family::gated_delta) in.beta = torch::rand({2, 3, T + 1, 1}, opt);
  if (family == Family::gated_delta) in.alpha = torch::rand({2, 3, T + 1, 1}, opt) * 0.5 + 0.5;
  if (family == Family::decay || family == Family::gated)
    in.log_a = torch::log_sigmoid(torch::randn({2, 3, T + 1, family == Family::decay ? D : 1}, opt) + 2);
  if (family == Family::decay) in.log_b = torch::log_sigmoid(torch::randn({2, 3, T + 1, M}, opt) + 2);
  return in;
}

K::RecurrenceResult naive(const K::StepInputs& in) {
  if (in.alpha.defined()) return K::gated_delta_recurrence_naive(in.q, in.k, in.v, in.alpha, in.beta, in.state0);
  if (in.beta.defined()) return K::delta_recurrence_naive(in.q, in.k, in.v, in.beta, in.state0);
  return K::decay_recurrence_naive(in.q, in.k, in.v, in.log_a, in.log_b, in.state0);
}

// The tokens [from, from + n) of every defined input.
K::StepInputs tokens(const K::StepInputs& in, int64_t from, int64_t n) {
  auto cut = [&](const torch::Tensor& t) { return t.defined() ? t.narrow(2, from, n) : t; };
  return {cut(in.q), cut(in.k), cut(in.v), cut(in.log_a), cut(in.log_b), cut(in.alpha), cut(in.beta), {}};
}

}  // namespace

TEST_CASE("one-token step: continues each family's naive recurrence, from a state and from none", "[kernels]") {
  torch::manual_seed(5);
  for (auto family : {Family::decay, Family::gated, Family::delta, Family::gated_delta}) {
    INFO("family " << static_cast<int>(family));
    const int64_t T = 6;
    const auto all = sequence(family, T);
    const auto whole = naive(all);
    auto last = tokens(all, T, 1);
    last.state0 = naive(tokens(all, 0, T)).state;
    const auto step = K::one_token_step(last);
    CHECK(step.y.sizes() == torch::IntArrayRef{2, 3, 1, 5});
    CHECK(max_abs_diff(step.y, whole.y.narrow(2, T, 1)) <= 1e-12);
    CHECK(max_abs_diff(step.state, whole.state) <= 1e-12);
    const auto first = K::one_token_step(tokens(all, 0, 1));  // no state yet: zero
    CHECK(max_abs_diff(first.y, whole.y.narrow(2, 0, 1)) <= 1e-12);
  }
}

TEST_CASE("one-token step: y in q's and v's common dtype, the state in fp32; taken only for a token off the CPU",
          "[kernels]") {
  torch::manual_seed(6);
  auto in = tokens(sequence(Family::decay, 0), 0, 1);
  auto low = in;
  for (auto* t : {&low.q, &low.k, &low.v}) *t = t->to(torch::kBFloat16);
  const auto r = K::one_token_step(low);
  CHECK(r.y.scalar_type() == torch::kBFloat16);
  CHECK(r.state.scalar_type() == torch::kFloat32);
  CHECK(max_abs_diff(r.y.to(torch::kFloat64), naive(in).y) <= 0.05);  // the inputs' bf16 rounding, nothing more
  low.q = low.q.to(torch::kFloat32);  // an attention normaliser's widened query: the parallel forms give fp32
  CHECK(K::one_token_step(low).y.scalar_type() == torch::kFloat32);
  auto wrong = in;
  wrong.log_b = wrong.log_b.narrow(3, 0, 3);  // neither 1 nor M wide
  CHECK_THROWS_WITH(K::one_token_step(wrong), Catch::Contains("log_b [B, H, 1, 1 or M]"));
  CHECK_FALSE(K::one_token_step_applies(in));  // the CPU's fused kernels serve its steps
  auto meta = in;
  for (auto* t : {&meta.q, &meta.k, &meta.v, &meta.log_a, &meta.log_b}) *t = t->to(torch::kMeta);
  CHECK(K::one_token_step_applies(meta));
  meta.q = torch::empty({2, 3, 2, 7}, torch::TensorOptions().device(torch::kMeta));  // two tokens: a sequence
  CHECK_FALSE(K::one_token_step_applies(meta));
  meta.q = torch::empty({2, 3, 1, 7}, torch::TensorOptions().device(torch::kMeta)).requires_grad_(true);
  CHECK_FALSE(K::one_token_step_applies(meta));  // a backward follows: the parallel forms
}

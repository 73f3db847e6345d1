// The first-use self-check (kernels/decay/kernel_guard.h) and the comparison it and `fwlab doctor` run
// (kernels/decay/kernel_check.h): a wrong kernel is caught, its shape class falls back to the libtorch form, whose
// results are right, and the listener hears of it once; with the check off the wrong result goes through (so the check
// is what catches it).
#include <catch2/catch.hpp>

#include <vector>

#include "kernels/decay/kernel_guard.h"
#include "kernels/decay/decay.h"
#include "tests/test_util.h"

namespace K = fwlab::kernels;
using fwlab::test::max_abs_diff;

namespace {

struct Hooks {  // the guard's process-wide settings for one test, restored after
  std::vector<K::KernelFallback> heard;
  explicit Hooks(const std::string& wrong, bool self_check = true) {
    K::reset_kernel_verdicts();
    K::set_wrong_kernel(wrong);
    K::set_kernel_self_check(self_check);
    K::on_kernel_fallback([this](const K::KernelFallback& f) { heard.push_back(f); });
  }
  ~Hooks() {
    K::set_wrong_kernel("");
    K::set_kernel_self_check(true);
    K::on_kernel_fallback(nullptr);
    K::reset_kernel_verdicts();
  }
};

fwlab::test::DecayInputs guard_inputs(int64_t T, int64_t D) {
  auto opt = torch::TensorOptions().dtype(torch::kFloat32);
  return {torch::randn({2, 2, T, 8}, opt),
          torch::randn({2, 2, T, 8}, opt),
          torch::randn({2, 2, T, D}, opt),
          torch::log_sigmoid(torch::randn({2, 2, T, 1}, opt) + 2),
          {},
          {}};
}

torch::Tensor dispatched(const fwlab::test::DecayInputs& in) {
  return K::decay_recurrence(in.q, in.k, in.v, in.log_a, in.log_b, in.state0, 64).y;
}

torch::Tensor naive(const fwlab::test::DecayInputs& in) {
  return K::decay_recurrence_naive(in.q, in.k, in.v, in.log_a, in.log_b, in.state0).y;
}

}  // namespace

TEST_CASE("kernel self-check: a wrong kernel falls back to the libtorch form and is reported once per shape class",
          "[kernels]") {
  torch::manual_seed(51);
  Hooks hooks("decay_fused_cpu");
  const auto in = guard_inputs(40, 12);
  CHECK(max_abs_diff(dispatched(in), naive(in)) < 1e-4);  // the libtorch form's result, not the wrong one
  REQUIRE(hooks.heard.size() == 1);
  CHECK(hooks.heard[0].kernel == "decay_fused_cpu");
  CHECK(hooks.heard[0].shape_class == "cpu Float D=12 M=8 gates=head");
  CHECK(hooks.heard[0].comparison.max_error > 0.05);  // 10% wrong outputs (and so gradients)
  CHECK(!hooks.heard[0].comparison.passed());
  dispatched(in);  // the verdict stands for the class: no second check, no second report
  CHECK(hooks.heard.size() == 1);
  const auto other = guard_inputs(40, 20);  // another class (D = 20): checked, and falls back too
  CHECK(max_abs_diff(dispatched(other), naive(other)) < 1e-4);
  CHECK(hooks.heard.size() == 2);
}

TEST_CASE("kernel self-check: off, the wrong kernel's result goes through unchecked", "[kernels]") {
  torch::manual_seed(52);
  Hooks hooks("decay_fused_cpu", false);
  const auto in = guard_inputs(40, 12);
  const auto y = dispatched(in), expect = naive(in);
  CHECK(max_abs_diff(y, expect * 1.1) < 1e-4);
  CHECK(hooks.heard.empty());
}

TEST_CASE("kernel self-check: a right kernel passes and runs, nothing reported", "[kernels]") {
  torch::manual_seed(53);
  Hooks hooks("");
  const auto in = guard_inputs(40, 12);
  CHECK(max_abs_diff(dispatched(in), naive(in)) < 1e-4);
  CHECK(hooks.heard.empty());
}

TEST_CASE("kernel comparison: the fused CPU kernel and the chunked kernel's host run agree with the libtorch form",
          "[kernels]") {
  K::DecayCase c;
  c.T = 150, c.D = 32, c.M = 32;
  for (double strength :
       {0.0, 1.0, 5.0}) {  // no decay, typical, strong (gates ~ 0.2; README says what stronger does to bf16)
    c.strength = strength;
    const auto fused = K::compare_with_libtorch(K::custom_kernel(K::CustomKernel::cpu_fused), c);
    INFO("strength " << strength << ": fused " << fused.max_error << " (" << fused.worst << ")");
    CHECK(fused.passed());
    const K::DecayKernel host_chunks = [](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                          const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& s) {
      return K::decay_recurrence_chunks_host(q, k, v, a, b, s, 4);
    };
    c.dtype = torch::kBFloat16;  // emulated bf16 stages against the fp32 libtorch form on the same rounded inputs
    const auto chunks = K::compare_with_libtorch(host_chunks, c);
    c.dtype = torch::kFloat32;
    INFO("chunks (bf16) " << chunks.max_error << " (" << chunks.worst << ")");
    CHECK(chunks.passed());
  }
  const K::DecayKernel wrong = [](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& s) {
    auto r = K::decay_recurrence_fused(q, k, v, a, b, s);
    r.state = r.state + 1e-2;  // only the final state is off
    return r;
  };
  const auto caught = K::compare_with_libtorch(wrong, c);
  CHECK(!caught.passed());
  CHECK(caught.worst == "state");
}

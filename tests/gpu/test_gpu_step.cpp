// The decode step on CUDA (kernels/common/recurrent_step.h): the step kernel against libtorch's step form on the CPU
// for each family and gate layout, from a state and from none, in fp64 and fp32 (the kernel must be the one that
// ran: a fallback would pass silently, so none may be reported); a wrong kernel falling back and reported; and every
// rule's model decoding on CUDA as its parallel form computes on the CPU. Part of fwlab_gpu_tests (its main skips
// without a device).
#include <catch2/catch.hpp>

#if defined(FWLAB_TORCH_CUDA)  // a CUDA libtorch: its streams (kernels/CMakeLists.txt defines it)
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "kernels/common/recurrent_step.h"
#include "kernels/decay/kernel_guard.h"
#include "models/gpt.h"
#include "tests/gpu/heard_fallbacks.h"
#include "tests/test_util.h"

using namespace fwlab;
namespace K = fwlab::kernels;
using fwlab::test::HeardFallbacks;

namespace {

// layout: "decay a=D b=M", "decay a=1", "decay b=1" (a key-side gate of one value alone), "add" (no gate),
// "delta", "gated delta".
K::StepInputs one_token(const std::string& layout, int64_t D, int64_t M, bool with_state) {
  const auto opt = torch::TensorOptions().dtype(torch::kFloat64);
  K::StepInputs in{torch::randn({2, 3, 1, M}, opt) / std::sqrt(double(M)),
                   torch::randn({2, 3, 1, M}, opt) * 0.3,
                   torch::randn({2, 3, 1, D}, opt),
                   {},
                   {},
                   {},
                   {},
                   {}};
  auto log_gate = [&](int64_t w) { return torch::log_sigmoid(torch::randn({2, 3, 1, w}, opt) + 1.0); };
  if (layout == "decay a=D b=M") in.log_a = log_gate(D), in.log_b = log_gate(M);
  if (layout == "decay a=1") in.log_a = log_gate(1);
  if (layout == "decay b=1") in.log_b = log_gate(1);
  if (layout == "delta" || layout == "gated delta") in.beta = torch::rand({2, 3, 1, 1}, opt);
  if (layout == "gated delta") in.alpha = torch::rand({2, 3, 1, 1}, opt) * 0.5 + 0.5;
  if (with_state) in.state0 = torch::randn({2, 3, D, M}, opt);
  return in;
}

K::StepInputs as(const K::StepInputs& in, torch::Device device, torch::ScalarType dtype) {
  auto to = [&](const torch::Tensor& t) { return t.defined() ? t.to(device, dtype) : t; };
  return {to(in.q), to(in.k), to(in.v), to(in.log_a), to(in.log_b), to(in.alpha), to(in.beta), to(in.state0)};
}

double gap(const torch::Tensor& a, const torch::Tensor& b) {
  const auto x = a.cpu().to(torch::kFloat64), y = b.cpu().to(torch::kFloat64);
  return (x - y).abs().max().item<double>() / std::max(1e-6, y.abs().max().item<double>());
}

}  // namespace

TEST_CASE("GPU: the CUDA step kernel == libtorch's step on the CPU, every family and gate layout, fp64 / fp32",
          "[gpu]") {
  torch::manual_seed(41);
  HeardFallbacks fallbacks;
  torch::NoGradGuard no_grad;
  for (auto dtype : {torch::kFloat64, torch::kFloat32})
    for (const std::string layout : {"decay a=D b=M", "decay a=1", "decay b=1", "add", "delta", "gated delta"})
      // M = 300: the key staging loops past the block's 128 threads; M = 1024: the widest the kernel stages.
      for (auto [D, M] : {std::pair<int64_t, int64_t>{17, 16}, {64, 100}, {8, 300}, {16, 1024}})
        for (bool with_state : {true, false}) {
          INFO(c10::toString(dtype) << " " << layout << " D=" << D << " M=" << M << " state " << with_state);
          const auto in = one_token(layout, D, M, with_state);
          const auto gpu = as(in, torch::kCUDA, dtype);
          REQUIRE(K::one_token_step_applies(gpu));
          const auto fast = K::one_token_step(gpu);
          const auto plain = K::one_token_step_libtorch(as(in, torch::kCPU, dtype));
          const double tolerance = dtype == torch::kFloat64 ? 1e-12 : 1e-5;
          CHECK(gap(fast.y, plain.y) <= tolerance);
          CHECK(gap(fast.state, plain.state) <= tolerance);
        }
  CHECK(fallbacks.heard.empty());
}

TEST_CASE("GPU: the CUDA step under mixed precision: bf16 q, k, v give a bf16 y and an fp32 state", "[gpu]") {
  torch::manual_seed(45);
  HeardFallbacks fallbacks;
  torch::NoGradGuard no_grad;
  for (const std::string layout : {"decay a=D b=M", "gated delta"}) {
    INFO(layout);
    auto in = one_token(layout, 64, 32, true);
    auto gpu = as(in, torch::kCUDA, torch::kFloat32);
    for (auto* t : {&gpu.q, &gpu.k, &gpu.v}) *t = t->to(torch::kBFloat16);
    for (auto* t : {&in.q, &in.k, &in.v}) *t = t->to(torch::kBFloat16).to(torch::kFloat64);  // the same rounding
    const auto r = K::one_token_step(gpu);
    CHECK(r.y.scalar_type() == torch::kBFloat16);
    CHECK(r.state.scalar_type() == torch::kFloat32);
    CHECK(gap(r.y, K::one_token_step_libtorch(in).y) <= 1e-2);  // y's own bf16 rounding
    CHECK(gap(r.state, K::one_token_step_libtorch(in).state) <= 1e-5);
  }
  CHECK(fallbacks.heard.empty());
}

TEST_CASE("GPU: a wrong CUDA step kernel falls back to libtorch's step, and the fallback is reported", "[gpu]") {
  torch::manual_seed(42);
  HeardFallbacks fallbacks;
  K::set_wrong_kernel(K::kCudaStepKernel);
  torch::NoGradGuard no_grad;
  const auto in = one_token("gated delta", 32, 32, true);
  const auto r = K::one_token_step(as(in, torch::kCUDA, torch::kFloat32));
  CHECK(gap(r.y, K::one_token_step_libtorch(as(in, torch::kCPU, torch::kFloat32)).y) <= 1e-5);
  REQUIRE(fallbacks.heard.size() == 1);
  CHECK(fallbacks.heard[0].rfind(K::kCudaStepKernel, 0) == 0);
}

TEST_CASE("GPU: every rule's model decodes on CUDA as its parallel form computes on the CPU (fp64)", "[gpu]") {
  torch::manual_seed(43);
  HeardFallbacks fallbacks;  // none: the kernel itself must be what decodes
  const auto cfg = test::every_rule_config();
  GPT model(cfg);
  model->to(torch::kFloat64);
  model->eval();
  torch::NoGradGuard guard;
  const auto idx = torch::randint(0, 50, {2, 40}, torch::kLong);
  const auto logits = model->forward(idx);
  model->to(torch::kCUDA);
  GenerationState state;
  for (int64_t t = 0; t < idx.size(1); ++t) {
    INFO("position " << t);
    CHECK(gap(model->step(idx.select(1, t).to(torch::kCUDA), state), logits.select(1, t)) <= 1e-9);
  }
  CHECK(fallbacks.heard.empty());
}

#if defined(FWLAB_TORCH_CUDA)
TEST_CASE("GPU: the CUDA step kernel launches on libtorch's current stream", "[gpu]") {
  // On a non-blocking side stream, q is written only after a long sleep; a launch on any other stream would read
  // the zeros q holds before that.
  torch::manual_seed(44);
  HeardFallbacks fallbacks;
  torch::NoGradGuard no_grad;
  const auto in = one_token("decay a=D b=M", 32, 32, true);
  auto gpu = as(in, torch::kCUDA, torch::kFloat32);
  (void)K::one_token_step(gpu);  // the class's first-use check, before the timed-out copy
  const auto q = gpu.q;
  gpu.q = torch::zeros_like(q);
  torch::cuda::synchronize();
  const auto side = c10::cuda::getStreamFromPool();
  torch::Tensor y;
  {
    const c10::cuda::CUDAStreamGuard on_side(side);
    at::cuda::sleep(200 * 1000 * 1000);  // ~0.1 s of GPU cycles ahead of the copy
    gpu.q.copy_(q);
    y = K::one_token_step(gpu).y;
  }
  side.synchronize();
  CHECK(gap(y, K::one_token_step_libtorch(as(in, torch::kCPU, torch::kFloat32)).y) <= 1e-5);
  CHECK(fallbacks.heard.empty());
}
#endif

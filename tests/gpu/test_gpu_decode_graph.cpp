// Greedy decoding as a CUDA graph per token (models/decode_graph.h) on a GPU: a model of every rule and a softmax
// layer gives, token after token, the greedy tokens and logits of the usual uncaptured step; the graph was captured
// (with a CUDA libtorch) and no kernel fell back. Part of fwlab_gpu_tests (its main skips without a device).
#include <catch2/catch.hpp>

#include "models/decode_graph.h"
#include "tests/gpu/heard_fallbacks.h"
#include "tests/test_util.h"

using namespace fwlab;

TEST_CASE("GPU: decoding in a CUDA graph gives the usual step's tokens and logits, every rule and softmax", "[gpu]") {
  torch::manual_seed(71);
  test::HeardFallbacks fallbacks;
  for (const auto dtype : {torch::kFloat64, torch::kFloat32}) {
    INFO(c10::toString(dtype));
    auto cfg = test::every_rule_config();
    cfg.layers.push_back(MixerSpec{});  // softmax, with a static cache in the graph
    cfg.n_layers = static_cast<int64_t>(cfg.layers.size());
    GPT model(cfg);
    model->to(torch::kCUDA, dtype);
    model->eval();
    torch::NoGradGuard no_grad;
    const auto prompt = torch::randint(0, 50, {2, 5}, torch::TensorOptions().dtype(torch::kLong).device(torch::kCUDA));
    GenerationState usual, graphed;
    torch::Tensor a, b;
    for (int64_t t = 0; t < prompt.size(1); ++t)
      a = model->step(prompt.select(1, t), usual), b = model->step(prompt.select(1, t), graphed);
    DecodeGraph graph(model, graphed, 40);
    for (int step = 0; step < 24; ++step) {
      INFO("decode step " << step);
      const auto tok = a.argmax(-1);  // both fed the usual step's token; fp32 may differ on a near tie
      if (dtype == torch::kFloat64) REQUIRE(torch::equal(tok, b.argmax(-1)));
      a = model->step(tok, usual), b = graph.step(tok);
      CHECK(test::max_abs_diff(a.cpu().to(torch::kFloat64), b.cpu().to(torch::kFloat64)) <=
            (dtype == torch::kFloat64 ? 1e-10 : 1e-4));
    }
#if defined(FWLAB_TORCH_CUDA)
    CHECK(graph.captured());
#endif
  }
  CHECK(fallbacks.heard.empty());
}

// A replay reads the parameters where the capture found them: an update in place between tokens (an optimizer's,
// a load's) must capture again, or the graph would decode with the old weights.
TEST_CASE("GPU: a parameter updated in place between tokens is read by the next graphed step", "[gpu]") {
  torch::manual_seed(72);
  test::HeardFallbacks fallbacks;
  GPT model(test::every_rule_config());
  model->to(torch::kCUDA, torch::kFloat64);
  model->eval();
  torch::NoGradGuard no_grad;
  auto tok = torch::randint(0, 50, {2}, torch::TensorOptions().dtype(torch::kLong).device(torch::kCUDA));
  GenerationState usual, graphed;
  model->step(tok, usual), model->step(tok, graphed);
  DecodeGraph graph(model, graphed, 16);
  for (int step = 0; step < 6; ++step) {
    INFO("decode step " << step);
    if (step == 3)
      for (auto& p : model->parameters()) p.mul_(1.25);  // every weight, in place: same addresses, new versions
    const auto a = model->step(tok, usual), b = graph.step(tok);
    CHECK(test::max_abs_diff(a.cpu(), b.cpu()) <= 1e-10);
    tok = a.argmax(-1);
  }
  CHECK(fallbacks.heard.empty());
}

#if defined(FWLAB_TORCH_CUDA)
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>

// A kernel's first-use check synchronises, which a capture forbids: a class first met while a graph is captured
// gets libtorch's form without a check, and no verdict is stored, so its first use outside a graph checks it (here
// a kernel made wrong, whose check fails and is heard only then).
TEST_CASE("GPU: no kernel check runs inside a CUDA graph capture; the class is checked at its next use", "[gpu]") {
  test::HeardFallbacks fallbacks;
  kernels::set_wrong_kernel(kernels::kernel_name(kernels::CustomKernel::cuda_chunked));
  const auto on = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA);
  const auto q = torch::randn({1, 2, 64, 16}, on), v = torch::randn({1, 2, 64, 32}, on);
  const auto log_a = -torch::rand({1, 2, 64, 32}, on), log_b = -torch::rand({1, 2, 64, 16}, on);
  auto x = torch::zeros({4}, on);
  auto side = c10::cuda::getStreamFromPool(false, q.get_device());
  torch::cuda::synchronize(q.get_device());
  bool trusted_in_capture = true;
  {
    const c10::cuda::CUDAStreamGuard on_side(side);
    at::cuda::CUDAGraph graph;
    graph.capture_begin();
    trusted_in_capture = kernels::kernel_trusted(kernels::CustomKernel::cuda_chunked, q, v, log_a, log_b);
    x.add_(1.0);  // something to capture
    graph.capture_end();
    graph.replay();
  }
  torch::cuda::synchronize(q.get_device());
  CHECK_FALSE(trusted_in_capture);
  CHECK(fallbacks.heard.empty());
  CHECK(x.sum().item<double>() == 4.0);
  CHECK_FALSE(kernels::kernel_trusted(kernels::CustomKernel::cuda_chunked, q, v, log_a, log_b));
  CHECK(fallbacks.heard.size() == 1);
}
#endif

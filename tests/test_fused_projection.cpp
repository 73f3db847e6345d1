// models/fused_projection.h: several Linear layers as one product. Bound here to each layer's own torch::linear in
// float64 (values and the gradients of every weight and bias); the layers' own forms are its twin inside a
// fast-weight layer too (tests/test_mixers.cpp runs every rule with the reference kernels, which project apart).
#include <catch2/catch.hpp>

#include "models/gpt.h"
#include "models/mixers.h"
#include "tests/test_util.h"

using namespace fwlab;
using fwlab::test::max_abs_diff;

namespace {

// Three layers reading width 6, the middle one without a bias (as a gated delta layer's a_proj and b_proj).
std::vector<torch::nn::Linear> three_layers() {
  std::vector<torch::nn::Linear> layers = {
      torch::nn::Linear(6, 9), torch::nn::Linear(torch::nn::LinearOptions(6, 4).bias(false)), torch::nn::Linear(6, 2)};
  for (auto& layer : layers) layer->to(torch::kFloat64);
  return layers;
}

std::vector<torch::Tensor> parameters_of(const std::vector<torch::nn::Linear>& layers) {
  std::vector<torch::Tensor> out;
  for (const auto& layer : layers)
    for (const auto& p : layer->parameters()) out.push_back(p);
  return out;
}

}  // namespace

TEST_CASE("fused projection: one product gives each layer's output and each parameter's gradient", "[model]") {
  torch::manual_seed(3);
  auto layers = three_layers();
  const auto x = torch::randn({2, 5, 6}, torch::kFloat64);
  FusedProjection fused;
  const auto out = fused(x, layers);
  REQUIRE(out.size() == 3);
  std::vector<torch::Tensor> upstream;
  auto fused_loss = torch::zeros({}, torch::kFloat64), apart_loss = torch::zeros({}, torch::kFloat64);
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto apart = torch::linear(x, layers[i]->weight, layers[i]->bias);
    REQUIRE(out[i].sizes() == apart.sizes());
    CHECK(max_abs_diff(out[i], apart) <= 1e-12);
    upstream.push_back(torch::randn_like(apart));
    fused_loss = fused_loss + (out[i] * upstream[i]).sum(), apart_loss = apart_loss + (apart * upstream[i]).sum();
  }
  const auto params = parameters_of(layers);
  const auto g_fused = torch::autograd::grad({fused_loss}, params);
  const auto g_apart = torch::autograd::grad({apart_loss}, params);
  REQUIRE(g_fused.size() == 5);  // two weights with biases, one without
  for (size_t i = 0; i < params.size(); ++i) CHECK(max_abs_diff(g_fused[i], g_apart[i]) <= 1e-12);
}

TEST_CASE("fused projection: without gradients the kept concatenation follows every change of the weights", "[model]") {
  torch::manual_seed(4);
  auto layers = three_layers();
  FusedProjection fused;
  torch::NoGradGuard guard;
  const auto token = torch::randn({1, 6}, torch::kFloat64);  // a decode step's row (few_rows_linear's own loop)
  // float32 to a few ulp: the loop's lanes and the BLAS sum the 6 products in orders that differ by CPU (an AVX2
  // EPYC's OpenBLAS kernel differs from the loop by 1-2 ulp where an AVX-512 one agreed exactly).
  auto expect_each = [&](const torch::Tensor& x) {
    const auto out = fused(x, layers, /*step=*/true);
    const double tol = x.scalar_type() == torch::kFloat64 ? 1e-12 : 1e-6;
    for (size_t i = 0; i < layers.size(); ++i)
      CHECK(max_abs_diff(out[i], torch::linear(x, layers[i]->weight, layers[i]->bias)) <= tol);
  };
  expect_each(token);
  layers[1]->weight.add_(0.5);  // an optimiser step: in place
  layers[2]->bias.fill_(3.0);
  expect_each(token);
  layers[0]->weight.set_data(torch::randn({9, 6}, torch::kFloat64));  // a load: new storage
  expect_each(token);
  for (auto& layer : layers) layer->to(torch::kFloat32);  // a move to another dtype
  expect_each(token.to(torch::kFloat32));
}

TEST_CASE("fused projection: a fast-weight layer keeps its parameters' names (checkpoints, export)", "[model]") {
  MixerSpec spec;
  spec.kind = "fast_weight", spec.rule = "decay", spec.feature_map = "relu", spec.m = 4;
  const auto cfg = test::small_config(spec, 1);
  FastWeight layer(cfg.layers[0], cfg);
  std::vector<std::string> names;
  for (const auto& p : layer.named_parameters()) names.push_back(p.key());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"decay_f.bias", "decay_f.weight", "decay_z.bias", "decay_z.weight", "o.bias",
                                          "o.weight", "phi.bias", "phi.weight", "qkv.bias", "qkv.weight"});
}

TEST_CASE("fused projection: a model of every rule decodes token by token as its parallel form computes (fp64)",
          "[model]") {
  // Without gradients each step reads the kept concatenation (the decay layer through its CPU decode step), the
  // parallel form a fresh one.
  torch::manual_seed(7);
  GPT model(test::every_rule_config());
  model->to(torch::kFloat64);
  model->eval();
  torch::NoGradGuard guard;
  const auto idx = torch::randint(0, 50, {2, 24}, torch::kLong);
  const auto logits = model->forward(idx);
  GenerationState state;
  for (int64_t t = 0; t < idx.size(1); ++t) {
    INFO("position " << t);
    CHECK(max_abs_diff(model->step(idx.select(1, t), state), logits.select(1, t)) <= 1e-9);
  }
}

// Static decoding (models/decode_graph.h), the part of a CUDA-graph decode step that runs anywhere: a model of every
// rule and a softmax layer decodes through DecodeGraph (uncaptured on the CPU) with the logits of the usual step and
// the same greedy tokens, every state tensor staying at its address from one token to the next (what a graph's
// replay needs); AddressKeeper refuses a state that changed shape; the capacity and context bounds hold without the
// step's own host checks.
#include <catch2/catch.hpp>

#include "models/decode_graph.h"
#include "tests/test_util.h"

using namespace fwlab;

namespace {

ModelConfig every_rule_and_softmax() {
  auto cfg = test::every_rule_config();
  cfg.layers.push_back(MixerSpec{});  // softmax
  cfg.n_layers = static_cast<int64_t>(cfg.layers.size());
  return cfg;
}

std::vector<const void*> addresses(GenerationState& state) {
  std::vector<const void*> out;
  for (auto* t : state_slots(state)) out.push_back(t->defined() ? t->data_ptr() : nullptr);
  return out;
}

}  // namespace

TEST_CASE("static decoding: the usual step's logits and greedy tokens for every rule and softmax, state in place",
          "[generate]") {
  torch::manual_seed(61);
  GPT model(every_rule_and_softmax());
  model->to(torch::kFloat64);
  model->eval();
  torch::NoGradGuard no_grad;
  const auto prompt = torch::randint(0, 50, {2, 6}, torch::kLong);
  GenerationState usual, fixed;
  torch::Tensor a, b;
  for (int64_t t = 0; t < prompt.size(1); ++t)
    a = model->step(prompt.select(1, t), usual), b = model->step(prompt.select(1, t), fixed);
  DecodeGraph graph(model, fixed, 32);
  CHECK_FALSE(graph.captured());  // the CPU: the static step runs uncaptured
  std::vector<const void*> first;
  for (int step = 0; step < 20; ++step) {
    INFO("decode step " << step);
    const auto tok = a.argmax(-1);
    REQUIRE(torch::equal(tok, b.argmax(-1)));
    a = model->step(tok, usual), b = graph.step(tok);
    CHECK(test::max_abs_diff(a, b) <= 1e-10);
    if (step == 0) first = addresses(fixed);
    CHECK(addresses(fixed) == first);
  }
  CHECK(fixed.position == usual.position);
  CHECK(fixed.position_tensor.item<int64_t>() == fixed.position);
  // The caches' capacity: 6 + 20 tokens so far, room for 6 more.
  for (int step = 0; step < 6; ++step) b = graph.step(b.argmax(-1));
  CHECK_THROWS_WITH(graph.step(b.argmax(-1)), Catch::Contains("past its caches' capacity of 32 tokens"));
}

TEST_CASE("static decoding: grouped-query softmax with rotary positions, uncaptured, as the usual step", "[generate]") {
  // Rotary models never capture (their step reads the host position), but their static step must still be right.
  torch::manual_seed(63);
  auto cfg = test::small_config(MixerSpec{}, 2, 8);
  cfg.n_heads = 4, cfg.n_kv_heads = 2, cfg.positions = "rope";
  GPT model(cfg);
  model->to(torch::kFloat64);
  model->eval();
  torch::NoGradGuard no_grad;
  GenerationState usual, fixed;
  auto a = model->step(torch::tensor({3, 7}), usual), b = model->step(torch::tensor({3, 7}), fixed);
  DecodeGraph graph(model, fixed, 16);
  for (int step = 0; step < 12; ++step) {
    const auto tok = a.argmax(-1);
    a = model->step(tok, usual), b = graph.step(tok);
    CHECK(test::max_abs_diff(a, b) <= 1e-10);
  }
  CHECK(decode_graph_refusal(model).size() > 0);
}

TEST_CASE("static decoding: refusals", "[generate]") {
  torch::manual_seed(62);
  GPT model(test::small_config(MixerSpec{}, 1, 8));  // learned positions, context 64
  model->eval();
  torch::NoGradGuard no_grad;
  GenerationState state;
  CHECK_THROWS_WITH(make_static(state, 8, torch::kCPU), Catch::Contains("has taken no step"));
  auto logits = model->step(torch::zeros({1}, torch::kLong), state);
  CHECK_THROWS_WITH(make_static(state, 1, torch::kCPU), Catch::Contains("leaves no room after 1"));
  make_static(state, 8, torch::kCPU);  // a second DecodeGraph on a static state could believe in a larger capacity
  CHECK_THROWS_WITH(make_static(state, 16, torch::kCPU), Catch::Contains("static already"));
  // A slot that changes shape cannot be kept in place.
  AddressKeeper keeper(state);
  state.layers[0].k_buffer = torch::zeros({1, 2, 3, 8});
  CHECK_FALSE(keeper.restore());
  // The learned position table's bound, checked by DecodeGraph itself (a replay runs no host check).
  GenerationState long_state;
  for (int t = 0; t < 63; ++t) logits = model->step(logits.argmax(-1), long_state);
  DecodeGraph graph(model, long_state, 100);
  logits = graph.step(logits.argmax(-1));
  CHECK_THROWS_WITH(graph.step(logits.argmax(-1)), Catch::Contains("past the model's context of 64"));
  CHECK_FALSE(decode_graph_refusal(model).empty());  // on the CPU
}

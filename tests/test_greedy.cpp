// Batched greedy generation for evaluation tasks (worker/greedy_until.h): prompts of different lengths share a
// batch, each row at its own place in its prompt; the texts must equal each prompt generated alone
// (models/generate.h), for a KV cache and for recurrent states, with and without a stop string.
#include <catch2/catch.hpp>

#include "models/generate.h"
#include "tests/test_util.h"
#include "text/corpora/dataset.h"
#include "worker/greedy_until.h"
#include "worker/teacher_kl.h"

using namespace fwlab;

namespace {

// Returns logits for a byte vocabulary: the tests decode generated ids as bytes.
GPT byte_model(const MixerSpec& mixer) {
  auto cfg = test::small_config(mixer);
  cfg.vocab = 256;
  torch::manual_seed(5);
  GPT model(cfg);
  model->eval();
  return model;
}

std::string alone(GPT& model, const ByteTokenizer& tok, const std::vector<int64_t>& prompt, int64_t n) {
  SamplingOptions o;
  o.greedy = true;
  o.tokens = n;
  const auto ids = generate(model, prompt, o).tokens;
  return tok.decode({ids.begin(), ids.end()});
}

}  // namespace

TEST_CASE("greedy_until: a batch of prompts of different lengths gives each prompt's own greedy text", "[generate]") {
  const ByteTokenizer tok;
  MixerSpec softmax;
  for (const auto& mixer : {softmax, test::fw("decay", "identity", "none", 4), test::fw("delta", "relu", "attn", 4)}) {
    INFO(mixer.kind << " " << mixer.rule);
    auto model = byte_model(mixer);
    std::vector<std::vector<int64_t>> prompts;
    for (const std::string text : {"abc", "the quick brown", "hello", "a much longer prompt of bytes", "xy"})
      prompts.emplace_back(text.begin(), text.end());
    const auto texts = greedy_until(model, tok, prompts, {7, "", 2});
    REQUIRE(texts.size() == prompts.size());
    std::set<std::string> distinct;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const auto expected = alone(model, tok, prompts[i], 7);
      CHECK(texts[i] == expected);
      distinct.insert(expected);
    }
    CHECK(distinct.size() > 1);  // the prompts lead to different texts: rows cannot be swapped unnoticed
    // A stop string ends a row's generation and cuts its text before it.
    const auto full = alone(model, tok, prompts[1], 7);
    const std::string stop(1, full[3]);
    const auto cut = greedy_until(model, tok, prompts, {7, stop, 4});
    CHECK(cut[1] == full.substr(0, full.find(stop)));
  }
}

TEST_CASE("generation past the context: learned positions stop there, rotary and no positions go on", "[generate]") {
  MixerSpec decay;
  decay.kind = "fast_weight", decay.rule = "decay", decay.feature_map = "identity", decay.norm = "none", decay.m = 4;
  SamplingOptions o;
  o.greedy = true;
  o.tokens = 40;
  const std::vector<int64_t> prompt{3, 5, 7};
  for (const auto& [positions, mixer] : std::vector<std::pair<std::string, MixerSpec>>{
           {"learned", MixerSpec{}}, {"rope", MixerSpec{}}, {"none", decay}, {"learned", decay}}) {
    auto cfg = test::small_config(mixer);
    cfg.positions = positions;
    cfg.context = 16;
    torch::manual_seed(3);
    GPT model(cfg);
    INFO(positions << " " << mixer.kind);
    const auto n = static_cast<int64_t>(generate(model, prompt, o).tokens.size());
    // Learned: the last token is chosen at position 15 (the prompt's 3 and 13 more), so 14 come out.
    CHECK(n == (positions == "learned" ? 16 - 3 + 1 : 40));
    GenerationState state;
    if (positions == "learned") {
      for (int64_t i = 0; i < 16; ++i) model->step(torch::full({1}, int64_t{1}, torch::kLong), state);
      CHECK_THROWS_WITH(model->step(torch::full({1}, int64_t{1}, torch::kLong), state),
                        Catch::Contains("its learned position table has 16 rows"));
    }
  }
}

TEST_CASE("validation_kl: KL(teacher || student) over the scored positions, as torch's kl_div computes it",
          "[generate]") {
  MixerSpec decay;
  decay.kind = "fast_weight", decay.rule = "decay", decay.feature_map = "identity", decay.norm = "none", decay.m = 4;
  auto cfg = test::small_config(MixerSpec{});
  cfg.vocab = 64, cfg.context = 16;
  torch::manual_seed(11);
  GPT teacher(cfg);
  auto student_cfg = test::small_config(decay);
  student_cfg.vocab = 64, student_cfg.context = 16;
  GPT student(student_cfg);
  std::vector<int32_t> ids(100);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7 + 3) % 64);
  const TokenStream tokens(ids);
  JobSpec spec;
  spec.train.seq_len = 16, spec.train.batch_size = 3, spec.eval.last_half = true;
  const double kl = validation_kl(student, teacher, tokens, spec, torch::kCPU);
  // By hand: the same windows (eval_windows), each window's scored positions, sum_v p_t (log p_t - log p_s).
  double total = 0;
  int64_t n = 0;
  torch::NoGradGuard guard;
  student->eval(), teacher->eval();
  for (const auto& w : eval_windows(static_cast<int64_t>(ids.size()), 16, true, 0)) {
    std::vector<int64_t> x(ids.begin() + w.start, ids.begin() + w.start + 16);
    const auto in = torch::tensor(x).view({1, 16});
    const auto ls = torch::log_softmax(student->forward(in)[0].to(torch::kFloat64), -1);
    const auto lt = torch::log_softmax(teacher->forward(in)[0].to(torch::kFloat64), -1);
    for (int64_t t = w.score_from; t < 16; ++t, ++n)
      total += torch::nn::functional::kl_div(
                   ls[t], lt[t], torch::nn::functional::KLDivFuncOptions().reduction(torch::kSum).log_target(true))
                   .item<double>();
  }
  CHECK(kl == Approx(total / static_cast<double>(n)).epsilon(1e-5));
  CHECK(kl > 0);
}

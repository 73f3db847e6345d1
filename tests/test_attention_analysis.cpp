// The attention analysis (T2R Figs. 5-6): its zero case, and a closed form where every key is alike.
#include <catch2/catch.hpp>

#include <cmath>

#include "models/attention_analysis.h"
#include "models/mixers.h"
#include "tests/test_util.h"

using namespace fwlab;

namespace {

double mean_over(const std::vector<std::vector<double>>& sums, int64_t queries) {
  double total = 0;
  size_t n = 0;
  for (const auto& layer : sums)
    for (double v : layer) total += v, ++n;
  return total / static_cast<double>(n) / static_cast<double>(queries);
}

// A one-layer model whose residual stream is the same vector at every position: no position embedding and one
// repeated token, so every key (and every query) of a layer is alike.
GPT constant_stream_model(const MixerSpec& mixer, int64_t n_heads) {
  auto cfg = test::small_config(mixer, 1, 8);
  cfg.n_heads = n_heads;
  cfg.d_model = n_heads * 8;
  GPT model(cfg);
  model->to(torch::kFloat64);
  model->eval();
  torch::NoGradGuard guard;
  model->wpe->weight.zero_();
  return model;
}

}  // namespace

TEST_CASE("attention analysis: a softmax model compared with itself is at distance 0", "[attention]") {
  torch::manual_seed(3);
  MixerSpec softmax;
  softmax.kind = "softmax";
  GPT model(test::small_config(softmax, 2, 8));
  model->to(torch::kFloat64);
  model->eval();
  AttentionStats stats;
  add_attention_stats(model, model, torch::randint(0, 32, {2, 13}), stats);
  REQUIRE(stats.layers == std::vector<size_t>{0, 1});
  CHECK(mean_over(stats.distance, stats.queries) == 0.0);
  CHECK(mean_over(stats.entropy, stats.queries) == Approx(mean_over(stats.teacher_entropy, stats.queries)));
  CHECK(mean_over(stats.entropy, stats.queries) > 0.1);  // causal rows over up to 13 keys are not one-hot
}

TEST_CASE("attention analysis: identical keys give the closed form of a constant gate", "[attention]") {
  // Every key alike: the softmax teacher attends uniformly, p_ts = 1 / (t + 1). The gated rule with a constant
  // gate g (gate weights 0, bias logit g) weights position s by g^(t-s) (1 - g) phi(q).phi(k), so after
  // normalization w_ts = g^(t-s) / sum_{r=0..t} g^r, the same for every head. Distance and entropy in closed form.
  torch::manual_seed(4);
  const double g = 0.8;
  const int64_t T = 9, heads = 2;
  GPT student = constant_stream_model(test::fw("gated", "identity", "attn", 8), heads);
  MixerSpec softmax;
  softmax.kind = "softmax";
  GPT teacher = constant_stream_model(softmax, heads);
  {
    torch::NoGradGuard guard;
    auto params = student->mixer(0).named_parameters();
    params["gate.weight"].zero_();
    params["gate.bias"].fill_(std::log(g / (1 - g)));
  }
  double distance = 0, entropy = 0, teacher_entropy = 0;
  for (int64_t t = 0; t < T; ++t) {
    double norm = 0;
    for (int64_t r = 0; r <= t; ++r) norm += std::pow(g, static_cast<double>(r));
    double d2 = 0;
    for (int64_t s = 0; s <= t; ++s) {
      const double w = std::pow(g, static_cast<double>(t - s)) / norm, p = 1.0 / static_cast<double>(t + 1);
      d2 += (w - p) * (w - p);
      entropy -= w * std::log(w);
    }
    distance += std::sqrt(d2);
    teacher_entropy += std::log(static_cast<double>(t + 1));
  }
  AttentionStats stats;
  add_attention_stats(student, teacher, torch::full({3, T}, 5, torch::kLong), stats);
  REQUIRE(stats.queries == 3 * T);
  for (int64_t h = 0; h < heads; ++h) {
    INFO("head " << h);
    CHECK(stats.distance[0][h] / 3 == Approx(distance).epsilon(1e-9));
    CHECK(stats.entropy[0][h] / 3 == Approx(entropy).epsilon(1e-9));
    CHECK(stats.teacher_entropy[0][h] / 3 == Approx(teacher_entropy).epsilon(1e-9));
  }
}

TEST_CASE("implied attention: all-zero coefficients give an all-zero row, signs count by magnitude", "[attention]") {
  auto c = torch::tensor({0.0, 0.0, -1.0, 3.0}, torch::kFloat64).view({1, 1, 1, 2, 2});
  auto w = implied_attention(c);
  CHECK(w[0][0][0][0].item<double>() == 0.0);
  CHECK(w[0][0][0][1].item<double>() == 0.0);
  CHECK(w[0][0][1][0].item<double>() == Approx(0.25));
  CHECK(w[0][0][1][1].item<double>() == Approx(0.75));
  CHECK(attention_entropy(w)[0][0][1].item<double>() == Approx(-(0.25 * std::log(0.25) + 0.75 * std::log(0.75))));
}

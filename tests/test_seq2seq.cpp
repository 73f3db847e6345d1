// The encoder-decoder (models/seq2seq/seq2seq.h): its step form against its parallel form, padding that leaks nothing,
// T2R's fast-weight cross read against the formula written out here, conversion, checkpoint averaging, and the
// beam search on a real model against an exhaustive search scored by the parallel form.
#include "models/seq2seq/label_smoothing.h"
#include "models/seq2seq/seq2seq_io.h"
#include "models/seq2seq/translate.h"
#include "tests/test_util.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <functional>

using namespace fwlab;
using test::max_abs_diff;

namespace {

ModelConfig seq2seq_config(const MixerSpec& self, const MixerSpec& cross, int64_t vocab = 40,
                           const MixerSpec& encoder = MixerSpec{}) {
  auto cfg = test::small_config(self, 2, 8);
  cfg.vocab = vocab;
  cfg.encoder_layers = 2;
  cfg.cross = cross;
  cfg.encoder = encoder;
  cfg.positions = "sinusoidal";
  cfg.activation = "relu";
  return cfg;
}

MixerSpec softmax() { return MixerSpec{}; }

Seq2Seq tiny_model(const ModelConfig& cfg, uint64_t seed = 3) {
  torch::manual_seed(seed);
  Seq2Seq model(cfg);
  model->to(torch::kDouble);
  model->eval();
  return model;
}

// Two sources of different lengths, right-padded with 0; ids >= 4 (0-3 are pad, unk, bos, eos).
torch::Tensor two_sources() { return torch::tensor({{5, 9, 7, 12, 3}, {8, 6, 3, 0, 0}}, torch::kLong); }

torch::Tensor step_logits(Seq2Seq& model, const torch::Tensor& src, const torch::Tensor& prev) {
  auto state = model->start(src);
  std::vector<torch::Tensor> out;
  for (int64_t t = 0; t < prev.size(1); ++t) out.push_back(model->step(prev.select(1, t), state));
  return torch::stack(out, 1);
}

MixerSpec srupp(bool attention = true) {
  MixerSpec s;
  s.kind = "srupp";
  s.attention = attention;
  return s;
}

struct ModelKind {
  MixerSpec self, cross, encoder;
};

const std::vector<std::pair<const char*, ModelKind>>& model_kinds() {
  static const std::vector<std::pair<const char*, ModelKind>> kinds = {
      {"softmax", {softmax(), softmax(), softmax()}},
      {"T2R 4/8", {test::fw("add", "relu", "attn", 4), test::fw("add", "relu", "attn", 8), softmax()}},
      {"delta self, softmax cross", {test::fw("delta", "dpfp", "attn", 16), softmax(), softmax()}},
      {"ELU", {test::fw("add", "elu1", "attn", 8), test::fw("add", "elu1", "attn", 8), softmax()}},
      {"SRU++ encoder and decoder", {srupp(), softmax(), srupp()}},
  };
  return kinds;
}

ModelConfig kind_config(const ModelKind& k, int64_t vocab = 40) {
  return seq2seq_config(k.self, k.cross, vocab, k.encoder);
}

}  // namespace

TEST_CASE("seq2seq: step decoding equals the parallel decoder, for every self mixer and cross kind", "[seq2seq]") {
  for (const auto& [name, kind] : model_kinds()) {
    INFO(name);
    auto model = tiny_model(kind_config(kind));
    auto src = two_sources();
    auto prev = torch::tensor({{2, 14, 20, 9, 31, 4}, {2, 7, 7, 18, 5, 11}}, torch::kLong);
    auto parallel = model->forward(src, prev);
    CHECK(max_abs_diff(parallel, step_logits(model, src, prev)) < 1e-10);
  }
}

TEST_CASE("seq2seq: a padded source decodes as it does alone", "[seq2seq]") {
  for (const auto& [name, kind] : model_kinds()) {
    INFO(name);
    auto model = tiny_model(kind_config(kind));
    auto prev = torch::tensor({{2, 14, 20, 9}, {2, 7, 7, 18}}, torch::kLong);
    auto batched = model->forward(two_sources(), prev);
    auto alone = model->forward(torch::tensor({{8, 6, 3}}, torch::kLong), prev.narrow(0, 1, 1));
    CHECK(max_abs_diff(batched.narrow(0, 1, 1), alone) < 1e-10);
  }
}

TEST_CASE("seq2seq: T2R's cross read is phi(q)^T S / max(|phi(q).z|, 0.01) over the non-pad source", "[seq2seq]") {
  auto cfg = seq2seq_config(softmax(), test::fw("add", "relu", "attn", 6));
  auto model = tiny_model(cfg);
  auto layer = model->decoder_layers()[0];  // a non-const handle
  auto& cross = *layer->cross;
  const auto* map = dynamic_cast<const ProjectionMap*>(cross.phi.get());
  REQUIRE(map);
  torch::manual_seed(1);
  auto memory = torch::randn({2, 5, cfg.d_model}, torch::kDouble),
       x = torch::randn({2, 3, cfg.d_model}, torch::kDouble);
  auto pad = torch::tensor({{false, false, false, false, false}, {false, false, true, true, true}});
  auto got = cross.forward(x, cross.remember(memory, pad));

  // Written out per sentence, head and query from the weights, looping over the source tokens that are not pad.
  const int64_t H = cfg.n_heads, hd = cfg.head_dim, inner = H * hd;
  auto kv = torch::nn::functional::linear(memory, cross.kv->weight, cross.kv->bias);
  auto q = torch::nn::functional::linear(x, cross.q->weight, cross.q->bias);
  auto expected = torch::zeros({2, 3, inner}, torch::kDouble);
  auto features = [&](const torch::Tensor& v, int64_t h) {
    return torch::relu(torch::mv(map->weight[h], v) + map->bias[h]);
  };
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < H; ++h) {
      auto S = torch::zeros({6, hd}, torch::kDouble), z = torch::zeros({6}, torch::kDouble);
      for (int64_t j = 0; j < 5; ++j) {
        if (pad[b][j].item<bool>()) continue;
        auto phi_k = features(kv[b][j].narrow(0, h * hd, hd), h);
        S += torch::outer(phi_k, kv[b][j].narrow(0, inner + h * hd, hd));
        z += phi_k;
      }
      for (int64_t t = 0; t < 3; ++t) {
        auto phi_q = features(q[b][t].narrow(0, h * hd, hd) / std::sqrt(static_cast<double>(hd)), h);
        auto denominator = std::max(std::abs(torch::dot(phi_q, z).item<double>()), 1e-2);
        expected[b][t].narrow(0, h * hd, hd).copy_(torch::mv(S.t(), phi_q) / denominator);
      }
    }
  expected = torch::nn::functional::linear(expected, cross.o->weight, cross.o->bias);
  CHECK(max_abs_diff(got, expected) < 1e-12);
}

TEST_CASE("seq2seq: converting softmax to T2R copies the encoder and projections and creates the feature maps",
          "[seq2seq]") {
  auto source = tiny_model(seq2seq_config(softmax(), softmax()));
  auto target_cfg = seq2seq_config(test::fw("add", "relu", "attn", 4), test::fw("add", "relu", "attn", 8));
  auto converted = convert_seq2seq(source, target_cfg, 7);
  const auto& created = converted.report.created;
  auto has = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  CHECK(has(created, "decoder.0.cross.phi.weight"));
  CHECK(has(created, "decoder.1.mixer.phi.weight"));
  CHECK(has(converted.report.copied, "decoder.1.cross.kv.weight"));
  CHECK(has(converted.report.copied, "encoder.1.attn.q.weight"));
  CHECK(has(converted.report.copied, "embed.weight"));
  for (const auto& name : created) CHECK(name.find(".phi.") != std::string::npos);
  auto source_tensors = source->named_parameters();
  auto converted_tensors = converted.model->named_parameters();
  for (const auto& name : converted.report.copied)
    CHECK(max_abs_diff(source_tensors[name], converted_tensors[name]) == 0);
  auto changed = target_cfg;
  changed.d_ff = 32;
  CHECK_THROWS_WITH(convert_seq2seq(source, changed, 7), Catch::Contains("d_ff"));
}

TEST_CASE("seq2seq: checkpoints round-trip and average elementwise", "[seq2seq][checkpoint]") {
  auto cfg = seq2seq_config(test::fw("add", "relu", "attn", 4), test::fw("add", "relu", "attn", 8));
  test::TempDir dir("seq2seq");
  std::vector<std::string> paths;
  std::vector<Seq2Seq> models;
  for (uint64_t seed : {1, 2, 3}) {
    models.push_back(tiny_model(cfg, seed));
    paths.push_back(dir.file(fmt::format("ckpt{}.safetensors", seed)));
    save_seq2seq(paths.back(), models.back());
  }
  auto loaded = load_seq2seq(paths[0]);
  CHECK(loaded->config() == cfg);
  CHECK(max_abs_diff(loaded->embed->weight, models[0]->embed->weight) == 0);
  const auto out = dir.file("avg.safetensors");
  average_checkpoints(paths, out);
  auto averaged = load_seq2seq(out);
  for (const char* name : {"embed.weight", "decoder.1.cross.phi.weight", "encoder.0.ln2.bias"}) {
    INFO(name);
    auto mean = (models[0]->named_parameters()[name] + models[1]->named_parameters()[name] +
                 models[2]->named_parameters()[name]) /
                3.0;
    CHECK(max_abs_diff(averaged->named_parameters()[name], mean) < 1e-15);
  }
  auto other = seq2seq_config(softmax(), softmax());
  save_seq2seq(paths[2], tiny_model(other));
  CHECK_THROWS_WITH(average_checkpoints(paths, out), Catch::Contains(paths[2]));
  CHECK_THROWS_WITH(load_model(paths[0]), Catch::Contains("encoder-decoder"));
}

namespace {

// Every output of at most `max_len` tokens from {4 .. V-1} followed by EOS, scored by the parallel form (one
// forward pass over BOS + output), the best by fairseq's length penalty.
Hypothesis exhaustive_best(Seq2Seq& model, const torch::Tensor& src, int64_t max_len, double alpha) {
  const int64_t V = model->config().vocab;
  Hypothesis best;
  best.score = -std::numeric_limits<double>::infinity();
  std::function<void(std::vector<int64_t>&)> walk = [&](std::vector<int64_t>& prefix) {
    auto output = prefix;
    output.push_back(3);
    std::vector<int64_t> prev = {2};
    prev.insert(prev.end(), output.begin(), output.end() - 1);
    auto logp = torch::log_softmax(model->forward(src, torch::tensor(prev, torch::kLong).unsqueeze(0)), -1)[0];
    double sum = 0;
    for (size_t t = 0; t < output.size(); ++t) sum += logp[static_cast<int64_t>(t)][output[t]].item<double>();
    const double score = sum / std::pow(static_cast<double>(output.size()), alpha);
    if (score > best.score) best = Hypothesis{output, sum, score};
    if (static_cast<int64_t>(prefix.size()) == max_len) return;
    for (int64_t token = 4; token < V; ++token) {
      prefix.push_back(token);
      walk(prefix);
      prefix.pop_back();
    }
  };
  std::vector<int64_t> prefix;
  walk(prefix);
  return best;
}

}  // namespace

TEST_CASE("seq2seq: beam search through the step form finds what an exhaustive search over the parallel form finds",
          "[seq2seq]") {
  for (const auto& [name, kind] : model_kinds()) {
    INFO(name);
    auto model = tiny_model(kind_config(kind, 7), 11);  // tokens 4, 5, 6 and EOS
    auto src = torch::tensor({{5, 6, 4, 3}, {4, 4, 3, 0}}, torch::kLong);
    BeamOptions options;
    options.beam = 64, options.max_len = 3, options.len_penalty = 0.6;
    const auto found = translate(model, src, options);
    for (int64_t b = 0; b < 2; ++b) {
      const auto best = exhaustive_best(model, src.narrow(0, b, 1).narrow(1, 0, b == 0 ? 4 : 3), 3, 0.6);
      CHECK(found[static_cast<size_t>(b)].tokens == best.tokens);
      CHECK(found[static_cast<size_t>(b)].score == Approx(best.score).epsilon(1e-9));
    }
    options.beam = 1;
    const auto greedy = translate(model, src, options);
    for (size_t b = 0; b < 2; ++b) CHECK(greedy[b].score <= found[b].score + 1e-12);
  }
}

TEST_CASE("label smoothing: cross entropy against 1 - eps on the reference and eps / (V - 1) elsewhere, pads ignored",
          "[seq2seq]") {
  torch::manual_seed(2);
  const int64_t V = 7;
  auto logits = torch::randn({2, 3, V}, torch::kDouble);
  auto target = torch::tensor({{4, 0, 2}, {6, 5, 0}}, torch::kLong);  // 0: pad
  for (double eps : {0.0, 0.1, 0.3}) {
    INFO(eps);
    const auto got = label_smoothed_loss(logits, target, eps, 0);
    double loss = 0, nll = 0;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t t = 0; t < 3; ++t) {
        const int64_t y = target[b][t].item<int64_t>();
        if (y == 0) continue;
        // log p_j = z_j - log sum exp z, written out
        const auto z = logits[b][t];
        const double log_norm = std::log(torch::exp(z).sum().item<double>());
        for (int64_t j = 0; j < V; ++j) {
          const double q = j == y ? 1.0 - eps : eps / static_cast<double>(V - 1);
          loss -= q * (z[j].item<double>() - log_norm);
        }
        nll -= z[y].item<double>() - log_norm;
      }
    CHECK(got.loss.item<double>() == Approx(loss).epsilon(1e-12));
    CHECK(got.nll.item<double>() == Approx(nll).epsilon(1e-12));
  }
}

TEST_CASE("seq2seq: reversing within lengths reverses the real tokens of each row and leaves its padding",
          "[seq2seq]") {
  auto x = torch::tensor({{1, 2, 3, 4}, {5, 6, 0, 0}, {7, 0, 0, 0}}, torch::kLong);
  auto lengths = torch::tensor({4, 2, 1}, torch::kLong);
  auto r = reverse_within_lengths(x, lengths);
  CHECK(torch::equal(r, torch::tensor({{4, 3, 2, 1}, {6, 5, 0, 0}, {7, 0, 0, 0}}, torch::kLong)));
  CHECK(torch::equal(reverse_within_lengths(r, lengths), x));
  auto wide = torch::arange(24, torch::kDouble).view({3, 4, 2});
  CHECK(torch::equal(reverse_within_lengths(wide, lengths).select(2, 1),
                     reverse_within_lengths(wide.select(2, 1), lengths)));
}

TEST_CASE(
    "seq2seq: the bidirectional SRU encoder's first half reads the past, its second half the future, within the "
    "sentence",
    "[seq2seq]") {
  auto cfg = seq2seq_config(softmax(), softmax(), 40, srupp(/*attention=*/false));
  torch::manual_seed(4);
  BidirectionalSru sru(cfg.encoder, cfg);
  sru->to(torch::kDouble);
  sru->eval();
  const int64_t d = cfg.d_model, half = d / 2;
  auto x = torch::randn({1, 7, d}, torch::kDouble);
  auto pad = torch::tensor({{false, false, false, false, false, true, true}});
  auto y = sru(x, pad);
  auto changed = x.clone();
  changed[0][2] += 1.0;  // a real token in the middle
  auto y2 = sru(changed, pad);
  auto moved = [&](int64_t t, int64_t from, int64_t n) {
    return test::max_abs_diff(y[0][t].narrow(0, from, n), y2[0][t].narrow(0, from, n)) > 1e-9;
  };
  for (int64_t t = 0; t < 2; ++t) CHECK_FALSE(moved(t, 0, half));  // forward: before the change
  for (int64_t t = 2; t < 5; ++t) CHECK(moved(t, 0, half));
  for (int64_t t = 0; t < 3; ++t) CHECK(moved(t, half, half));  // backward: up to the change
  for (int64_t t = 3; t < 5; ++t) CHECK_FALSE(moved(t, half, half));
  auto padding_changed = x.clone();
  padding_changed[0][6] += 5.0;  // padding reaches no real token in either direction
  CHECK(test::max_abs_diff(sru(padding_changed, pad).narrow(1, 0, 5), y.narrow(1, 0, 5)) == 0);
}

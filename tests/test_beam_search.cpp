// Beam and greedy search (models/seq2seq/beam_search.h) on toy decoders whose log-probabilities are a deterministic
// function of each row's sentence and whole prefix, so that every answer can be checked without the search: against
// an enumeration of every output, against an unbatched reference beam search written from fairseq's description,
// and against each sentence decoded alone.
// The torch header first, as the build's precompiled header does: glog's CHECK (through torch) would otherwise
// replace Catch's in a standalone compile.
#include "models/seq2seq/beam_search.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

using namespace fwlab;

namespace {

constexpr int64_t kPad = 0, kBos = 1, kEos = 2, kVocab = 5;  // the real tokens are 3 and 4
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

BeamOptions toy_options(int64_t beam, int64_t max_len, const std::string& penalty = "fairseq", double alpha = 1.0) {
  BeamOptions o;
  o.beam = beam;
  o.max_len = max_len;
  o.penalty = penalty;
  o.len_penalty = alpha;
  o.bos = kBos;
  o.eos = kEos;
  o.pad = kPad;
  return o;
}

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The toy model: next-token log-probabilities for a sentence and a prefix (generated tokens, BOS not included).
// Pad and BOS are at -inf; the logits of EOS, 3 and 4 come from a hash of the sentence and the whole prefix.
struct Toy {
  double scale = 2.5;     // spread of the random logits
  double eos_bias = 0.0;  // added to EOS's logit: very negative for a model that does not want to stop
  // Probabilities of (EOS, 3, 4) for chosen (sentence, prefix), replacing the hashed ones.
  std::map<std::pair<int64_t, std::vector<int64_t>>, std::vector<double>> fixed;
  bool as_float = false;  // the decoder returns float log-probabilities

  std::vector<double> logprobs(int64_t sentence, const std::vector<int64_t>& prefix) const {
    std::vector<double> logit(kVocab, kNegInf);
    const auto it = fixed.find({sentence, prefix});
    if (it != fixed.end()) {
      for (int64_t t = kEos; t < kVocab; ++t) logit[t] = std::log(it->second[t - kEos]);
    } else {
      uint64_t h = mix(0x5eedULL + static_cast<uint64_t>(sentence));
      for (const int64_t t : prefix) h = mix(h ^ (static_cast<uint64_t>(t) + 1) * 0x2545f4914f6cdd1dULL);
      for (int64_t t = kEos; t < kVocab; ++t) {
        h = mix(h);
        const double u = static_cast<double>(h >> 11) * 0x1.0p-53;
        logit[t] = scale * (2 * u - 1) + (t == kEos ? eos_bias : 0.0);
      }
    }
    double top = kNegInf, z = 0;
    for (const double l : logit) top = std::max(top, l);
    for (const double l : logit) z += std::exp(l - top);
    for (double& l : logit) l = l - top - std::log(z);
    return logit;
  }
};

// The toy as a batched decoder. State: the prefix of every row [N, t] (BOS first) and the sentence of every row;
// it also records the row count of every step, to see that finished sentences leave the batch.
struct ToyState {
  const Toy* toy = nullptr;
  torch::Tensor prefixes, sentence;
  std::vector<int64_t> rows_per_step;
};

torch::Tensor toy_step(ToyState& st, const torch::Tensor& tokens) {
  if (tokens.dim() != 1 || tokens.size(0) != st.prefixes.size(0) || tokens.scalar_type() != torch::kLong) {
    throw std::logic_error("toy: tokens must be [rows] int64");
  }
  st.prefixes = torch::cat({st.prefixes, tokens.view({-1, 1})}, 1);
  st.rows_per_step.push_back(tokens.size(0));
  const auto pre = st.prefixes.accessor<int64_t, 2>();
  const auto sent = st.sentence.accessor<int64_t, 1>();
  std::vector<double> out;
  for (int64_t r = 0; r < pre.size(0); ++r) {
    if (pre[r][0] != kBos) throw std::logic_error("toy: the first token fed must be BOS");
    std::vector<int64_t> prefix;
    for (int64_t j = 1; j < pre.size(1); ++j) {
      if (pre[r][j] == kPad || pre[r][j] == kBos) throw std::logic_error("toy: fed a token that is never generated");
      prefix.push_back(pre[r][j]);
    }
    const std::vector<double> lp = st.toy->logprobs(sent[r], prefix);
    out.insert(out.end(), lp.begin(), lp.end());
  }
  const torch::Tensor lp = torch::tensor(out, torch::kDouble).view({pre.size(0), kVocab});
  return st.toy->as_float ? lp.to(torch::kFloat) : lp;
}

struct ToyDecoder {
  StepDecoder decoder;
  std::shared_ptr<ToyState> state;
};

ToyDecoder toy_decoder(const Toy& toy, const std::vector<int64_t>& sentences) {
  auto st = std::make_shared<ToyState>();
  st->toy = &toy;
  st->sentence = torch::tensor(sentences, torch::kLong);
  st->prefixes = torch::empty({static_cast<int64_t>(sentences.size()), 0}, torch::kLong);
  StepDecoder d;
  d.step = [st](const torch::Tensor& tokens) { return toy_step(*st, tokens); };
  d.reorder = [st](const torch::Tensor& rows) {
    const int64_t n = st->prefixes.size(0);
    if (rows.numel() > 0 && (rows.min().item<int64_t>() < 0 || rows.max().item<int64_t>() >= n)) {
      throw std::logic_error("toy: reorder row out of range");
    }
    st->prefixes = st->prefixes.index_select(0, rows);
    st->sentence = st->sentence.index_select(0, rows);
  };
  return {d, st};
}

std::vector<Hypothesis> run_beam(const Toy& toy, const std::vector<int64_t>& sentences, const BeamOptions& o) {
  ToyDecoder d = toy_decoder(toy, sentences);
  return beam_search(d.decoder, static_cast<int64_t>(sentences.size()), o);
}

std::vector<Hypothesis> run_greedy(const Toy& toy, const std::vector<int64_t>& sentences, const BeamOptions& o) {
  ToyDecoder d = toy_decoder(toy, sentences);
  return greedy_search(d.decoder, static_cast<int64_t>(sentences.size()), o);
}

// The test's own length penalty, written from the formulas rather than taken from length_divisor.
double divisor(size_t length, const std::string& penalty, double alpha) {
  const auto len = static_cast<double>(length);
  return penalty == "gnmt" ? std::pow((5 + len) / 6, alpha) : std::pow(len, alpha);
}

// The summed log-probability of `tokens`, fed one at a time through a fresh toy decoder of one row.
double walk(const Toy& toy, int64_t sentence, const std::vector<int64_t>& tokens) {
  ToyDecoder d = toy_decoder(toy, {sentence});
  double lp = 0;
  int64_t feed = kBos;
  for (const int64_t t : tokens) {
    const torch::Tensor out = d.decoder.step(torch::tensor({feed}, torch::kLong)).to(torch::kDouble);
    lp += out[0][t].item<double>();
    feed = t;
  }
  return lp;
}

Hypothesis scored(const Toy& toy, int64_t sentence, std::vector<int64_t> tokens, const BeamOptions& o) {
  Hypothesis h;
  h.tokens = std::move(tokens);
  h.logprob = walk(toy, sentence, h.tokens);
  h.score = h.logprob / divisor(h.tokens.size(), o.penalty, o.len_penalty);
  return h;
}

// Every output (0..max_len real tokens, then EOS), scored through the toy; the best, the first of equals.
Hypothesis exhaustive_best(const Toy& toy, int64_t sentence, const BeamOptions& o) {
  Hypothesis best;
  best.score = kNegInf;
  for (int64_t len = 0; len <= o.max_len; ++len) {
    for (int64_t bits = 0; bits < (int64_t{1} << len); ++bits) {
      std::vector<int64_t> tokens;
      for (int64_t j = 0; j < len; ++j) tokens.push_back((bits >> j) & 1 ? 4 : 3);
      tokens.push_back(kEos);
      Hypothesis h = scored(toy, sentence, std::move(tokens), o);
      if (h.score > best.score) best = std::move(h);
    }
  }
  return best;
}

// fairseq's beam search for one sentence as a plain loop over vectors: the 2*beam best (beam, token) candidates by
// summed log-probability; an EOS among the first `beam` is finalized (at most `beam` in all); the first `beam`
// others go on; done at `beam` finalized or when none goes on; at max_len only EOS may follow.
Hypothesis reference_beam(const Toy& toy, int64_t sentence, const BeamOptions& o) {
  struct Live {
    std::vector<int64_t> tokens;
    double logprob;
  };
  struct Cand {
    double score;
    size_t from;
    int64_t token;
  };
  const auto beam = static_cast<size_t>(o.beam);
  std::vector<Live> beams{{{}, 0.0}};
  std::vector<Hypothesis> finalized;
  for (int64_t step = 0; step <= o.max_len; ++step) {
    std::vector<Cand> cands;
    for (size_t b = 0; b < beams.size(); ++b) {
      const std::vector<double> lp = toy.logprobs(sentence, beams[b].tokens);
      for (int64_t t = 0; t < kVocab; ++t) {
        const bool allowed = t != kPad && t != kBos && (step < o.max_len || t == kEos) && lp[t] > kNegInf;
        if (allowed) cands.push_back({beams[b].logprob + lp[t], b, t});
      }
    }
    std::stable_sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) { return a.score > b.score; });
    if (cands.size() > 2 * beam) cands.resize(2 * beam);
    std::vector<Live> next;
    for (size_t c = 0; c < cands.size(); ++c) {
      std::vector<int64_t> tokens = beams[cands[c].from].tokens;
      tokens.push_back(cands[c].token);
      if (cands[c].token == kEos) {
        if (c < beam && finalized.size() < beam) {
          const double div = divisor(tokens.size(), o.penalty, o.len_penalty);
          finalized.push_back({tokens, cands[c].score, cands[c].score / div});
        }
      } else if (next.size() < beam) {
        next.push_back({tokens, cands[c].score});
      }
    }
    if (finalized.size() >= beam || next.empty()) break;
    beams = std::move(next);
  }
  Hypothesis best;
  best.score = kNegInf;
  for (const Hypothesis& h : finalized) {
    if (h.score > best.score) best = h;
  }
  return best;
}

void check_same(const Hypothesis& got, const Hypothesis& want) {
  CHECK(got.tokens == want.tokens);
  CHECK(got.logprob == Approx(want.logprob).epsilon(1e-12).margin(1e-12));
  CHECK(got.score == Approx(want.score).epsilon(1e-12).margin(1e-12));
}

// A hypothesis' numbers are those of its tokens walked through the toy.
void check_consistent(const Toy& toy, int64_t sentence, const Hypothesis& h, const BeamOptions& o) {
  REQUIRE(!h.tokens.empty());
  CHECK(h.tokens.back() == kEos);
  CHECK(std::count(h.tokens.begin(), h.tokens.end(), kEos) == 1);
  CHECK(static_cast<int64_t>(h.tokens.size()) <= o.max_len + 1);
  check_same(h, scored(toy, sentence, h.tokens, o));
}

std::vector<int64_t> range(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

}  // namespace

TEST_CASE("beam_search: with nothing pruned, the answer is the best of every output", "[seq2seq]") {
  const Toy toy;
  const std::vector<int64_t> sentences = range(8);
  std::vector<std::vector<std::vector<int64_t>>> winners;  // per penalty, per sentence
  for (const auto& [penalty, alpha] : std::vector<std::pair<std::string, double>>{
           {"fairseq", 0.0}, {"fairseq", 0.6}, {"fairseq", 1.0}, {"gnmt", 0.6}, {"gnmt", 1.0}}) {
    INFO(penalty << " alpha " << alpha);
    // max_len 4 has 31 outputs, at most 16 live rows and 24 candidates a step: beam 64 prunes nothing.
    const BeamOptions o = toy_options(64, 4, penalty, alpha);
    const std::vector<Hypothesis> got = run_beam(toy, sentences, o);
    REQUIRE(got.size() == sentences.size());
    winners.emplace_back();
    for (const int64_t s : sentences) {
      INFO("sentence " << s);
      check_same(got[static_cast<size_t>(s)], exhaustive_best(toy, s, o));
      winners.back().push_back(got[static_cast<size_t>(s)].tokens);
    }
  }
  // The toy must make the penalties matter, or this test could not tell them apart.
  CHECK(winners.front() != winners.back());
  CHECK(winners[1] != winners[2]);
}

TEST_CASE("beam_search: beam 2 finds what greedy misses, exactly as fairseq's beam search", "[seq2seq]") {
  SECTION("a first token whose continuations are poor") {
    Toy toy;
    // Greedy takes 3 (0.5) and then EOS (0.34): 0.17. Beam 2 keeps 4 (0.4) too, and 4 EOS is 0.36.
    toy.fixed[{0, {}}] = {0.1, 0.5, 0.4};
    toy.fixed[{0, {3}}] = {0.34, 0.335, 0.325};
    toy.fixed[{0, {4}}] = {0.9, 0.05, 0.05};
    const BeamOptions o = toy_options(2, 6);
    const Hypothesis greedy = run_greedy(toy, {0}, o).at(0);
    const Hypothesis beam = run_beam(toy, {0}, o).at(0);
    CHECK(greedy.tokens == std::vector<int64_t>{3, kEos});
    CHECK(greedy.logprob == Approx(std::log(0.5 * 0.34)));
    CHECK(beam.tokens == std::vector<int64_t>{4, kEos});
    CHECK(beam.logprob == Approx(std::log(0.4 * 0.9)));
    CHECK(beam.score > greedy.score + 0.3);
    check_same(beam, reference_beam(toy, 0, o));
  }
  SECTION("random toys: the batched search is the reference search, and the beam is really pruned") {
    Toy toy;
    toy.eos_bias = -1.0;  // longer outputs, so that pruning matters
    const std::vector<int64_t> sentences = range(40);
    for (const int64_t beam : {2, 3}) {
      INFO("beam " << beam);
      const BeamOptions o = toy_options(beam, 6, "fairseq", 0.6);
      const std::vector<Hypothesis> got = run_beam(toy, sentences, o);
      const std::vector<Hypothesis> greedy = run_greedy(toy, sentences, o);
      int beats_greedy = 0, misses_best = 0;
      for (const int64_t s : sentences) {
        INFO("sentence " << s);
        const Hypothesis& h = got[static_cast<size_t>(s)];
        check_same(h, reference_beam(toy, s, o));
        check_consistent(toy, s, h, o);
        beats_greedy += h.score > greedy[static_cast<size_t>(s)].score + 1e-9;
        misses_best += exhaustive_best(toy, s, o).score > h.score + 1e-9;
      }
      // Both sides of a real search: better than greedy somewhere, worse than exhaustive somewhere.
      CHECK(beats_greedy > 0);
      CHECK(misses_best > 0);
    }
  }
}

TEST_CASE("beam_search and greedy_search: a batch gives each sentence its own result", "[seq2seq]") {
  Toy toy;
  toy.as_float = true;  // the float path: the search sums in double either way
  toy.eos_bias = -0.5;
  const std::vector<int64_t> sentences{0, 1, 2};
  for (const int64_t beam : {1, 3, 5}) {
    INFO("beam " << beam);
    const BeamOptions o = toy_options(beam, 8, "gnmt", 0.8);
    ToyDecoder batched = toy_decoder(toy, sentences);
    const std::vector<Hypothesis> together =
        beam == 1 ? greedy_search(batched.decoder, 3, o) : beam_search(batched.decoder, 3, o);
    REQUIRE(together.size() == 3);
    for (const int64_t s : sentences) {
      INFO("sentence " << s);
      const std::vector<Hypothesis> alone = beam == 1 ? run_greedy(toy, {s}, o) : run_beam(toy, {s}, o);
      REQUIRE(alone.size() == 1);
      check_same(together[static_cast<size_t>(s)], alone[0]);
      if (beam == 1) check_same(together[static_cast<size_t>(s)], run_beam(toy, {s}, o).at(0));
    }
    // Outputs of different lengths, so that finished sentences left the batch while others went on.
    CHECK(together[0].tokens.size() != together[1].tokens.size());
    const std::vector<int64_t>& rows = batched.state->rows_per_step;
    REQUIRE(rows.size() >= 2);
    CHECK(std::is_sorted(rows.begin() + 1, rows.end(), std::greater<>()));
    CHECK(rows.back() < rows[1]);
  }
}

TEST_CASE("length_divisor: fairseq's len^alpha and GNMT's ((5 + len) / 6)^alpha", "[seq2seq]") {
  BeamOptions o;
  o.len_penalty = 0.6;
  o.penalty = "fairseq";
  CHECK(length_divisor(4, o) == Approx(2.2973967099940698).epsilon(1e-14));  // 4^0.6
  o.penalty = "gnmt";
  CHECK(length_divisor(4, o) == Approx(1.2754245006257907).epsilon(1e-14));  // 1.5^0.6
  o.len_penalty = 1.0;
  CHECK(length_divisor(6, o) == Approx(11.0 / 6.0).epsilon(1e-14));
  o.penalty = "fairseq";
  CHECK(length_divisor(7, o) == Approx(7.0).epsilon(1e-14));
  o.len_penalty = 0.0;
  CHECK(length_divisor(9, o) == 1.0);
  o.penalty = "wu";
  CHECK_THROWS_AS(length_divisor(4, o), std::invalid_argument);
  Toy toy;
  ToyDecoder d = toy_decoder(toy, {0});
  CHECK_THROWS_AS(beam_search(d.decoder, 1, o), std::invalid_argument);
  CHECK(d.state->rows_per_step.empty());  // rejected before the decoder ran
}

TEST_CASE("beam_search and greedy_search: at max_len only EOS may follow", "[seq2seq]") {
  const std::vector<int64_t> sentences = range(4);
  SECTION("a model that does not want to stop is stopped at max_len + 1 tokens") {
    Toy toy;
    toy.eos_bias = -40.0;
    for (const int64_t beam : {1, 3}) {
      INFO("beam " << beam);
      const BeamOptions o = toy_options(beam, 5);
      const std::vector<Hypothesis> greedy = run_greedy(toy, sentences, o);
      const std::vector<Hypothesis> got = run_beam(toy, sentences, o);
      for (const int64_t s : sentences) {
        for (const Hypothesis& h : {greedy[static_cast<size_t>(s)], got[static_cast<size_t>(s)]}) {
          CHECK(h.tokens.size() == 6);
          check_consistent(toy, s, h, o);
        }
      }
    }
  }
  SECTION("a model that can never stop gives an empty hypothesis at -inf") {
    Toy toy;
    toy.eos_bias = kNegInf;
    const BeamOptions o = toy_options(3, 3);
    for (const auto& result : {run_greedy(toy, sentences, o), run_beam(toy, sentences, o)}) {
      REQUIRE(result.size() == sentences.size());
      for (const Hypothesis& h : result) {
        CHECK(h.tokens.empty());
        CHECK(h.score == kNegInf);
        CHECK(h.logprob == kNegInf);
      }
    }
  }
}

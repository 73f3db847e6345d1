// Beam search as fairseq's SequenceGenerator does it: each sentence keeps `beam` rows; a step takes its 2*beam best
// continuations over beam x V, finalizes the EOS ones that rank among the first `beam`, and goes on with the best
// `beam` others; a sentence is done at `beam` finalized hypotheses or when nothing can go on (at max_len only EOS
// may follow). The scoring (add, top-k) runs batched on the log-probabilities' device; the bookkeeping after the
// top-k is a handful of comparisons per candidate and is done on the host, where it reads plainly.
#include "models/seq2seq/beam_search.h"

#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <tuple>
#include <utility>

namespace fwlab {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// A row of the search, aligned with the decoder's row of the same index.
struct Beam {
  std::vector<int64_t> tokens;  // generated so far, BOS not included
  double logprob = 0;           // kNegInf for a dead row, kept only so that every sentence has `beam` rows
};

// A sentence still in the batch.
struct Sentence {
  int64_t id = 0;
  std::vector<Hypothesis> finalized;
};

// A continuation chosen for the next step: the decoder row it extends (index in the whole batch) and its token.
struct Pick {
  int64_t parent = 0;
  int64_t token = 0;
  double logprob = 0;
};

// Each sentence's best 2*beam continuations, read back to the host: score descending, index = row in the
// sentence * V + token.
struct Candidates {
  torch::Tensor score;  // [S, 2*beam] double
  torch::Tensor index;  // [S, 2*beam] int64
};

// One step's outcome for the batch: the sentences that go on, their rows, and what the decoder must be told.
struct Transition {
  std::vector<Sentence> live;
  std::vector<Beam> beams;
  std::vector<int64_t> parents, tokens;
};

Hypothesis no_hypothesis() {
  Hypothesis h;
  h.logprob = h.score = kNegInf;
  return h;
}

// Checked before the decoder runs, so that a bad option fails without side effects on the decoder.
void check_options(const BeamOptions& o, int64_t batch) {
  if (batch < 0) throw std::invalid_argument("search: batch must be >= 0");
  if (o.max_len < 0) throw std::invalid_argument("search: max_len must be >= 0");
  if (o.bos < 0 || o.eos < 0 || o.pad < 0) throw std::invalid_argument("search: bos, eos and pad must be >= 0");
  // EOS must stay possible, and pad and bos are masked out.
  if (o.eos == o.pad || o.eos == o.bos) throw std::invalid_argument("search: eos must differ from pad and bos");
  (void)length_divisor(1, o);  // rejects an unknown penalty
}

// The decoder's next-token log-probabilities as doubles (the running scores are summed in double), with what may
// not be emitted at this step at -inf. Forcing EOS keeps the model's own EOS log-probability, unnormalised, as
// fairseq does.
torch::Tensor next_logprobs(StepDecoder& decoder, const torch::Tensor& feed, int64_t step, const BeamOptions& o) {
  torch::Tensor lp = decoder.step(feed);
  TORCH_CHECK(lp.dim() == 2 && lp.size(0) == feed.size(0), "search: step must return [", feed.size(0),
              ", V] log-probabilities, got ", lp.sizes());
  const int64_t vocab = lp.size(1);
  TORCH_CHECK(o.bos < vocab && o.eos < vocab && o.pad < vocab, "search: bos, eos and pad must be < V = ", vocab);
  // Always a copy: the masking below is in place, and the decoder may keep the tensor it returned.
  lp = lp.to(torch::kDouble, /*non_blocking=*/false, /*copy=*/true);
  if (step >= o.max_len) {
    const torch::Tensor eos = lp.select(1, o.eos).clone();
    lp.fill_(kNegInf);
    lp.select(1, o.eos).copy_(eos);
  }
  lp.select(1, o.pad).fill_(kNegInf);
  lp.select(1, o.bos).fill_(kNegInf);
  return lp;
}

Candidates top_candidates(const torch::Tensor& lp, const std::vector<Beam>& beams, int64_t sentences, int64_t beam) {
  std::vector<double> prev(beams.size());
  for (size_t r = 0; r < beams.size(); ++r) prev[r] = beams[r].logprob;
  const torch::Tensor running = torch::tensor(prev, torch::kDouble).to(lp.device());
  torch::Tensor cum = (lp + running.unsqueeze(1)).reshape({sentences, -1});
  const int64_t k = 2 * beam;
  // A pool smaller than 2*beam (the first step, a tiny vocabulary) is padded with impossible candidates rather than
  // shrinking k: fairseq assumes a large vocabulary, and this keeps its rules without special cases.
  if (cum.size(1) < k) {
    cum = torch::cat({cum, torch::full({sentences, k - cum.size(1)}, kNegInf, cum.options())}, 1);
  }
  const auto [score, index] = cum.topk(k, 1);
  return {score.to(torch::kCPU).contiguous(), index.to(torch::kCPU).contiguous()};
}

// fairseq's step for one sentence. Only an EOS among the first `beam` candidates is finalized: one further down is
// worse than `beam` continuations that may still improve on it. Returns the best `beam` non-EOS candidates (fewer
// when fewer are possible).
std::vector<Pick> advance(Sentence& s, const double* score, const int64_t* index, int64_t first_row,
                          const std::vector<Beam>& beams, int64_t vocab, const BeamOptions& o) {
  std::vector<Pick> picks;
  const auto beam = static_cast<size_t>(o.beam);
  for (size_t c = 0; c < 2 * beam; ++c) {
    if (!(score[c] > kNegInf)) continue;  // a masked token, a dead row's continuation, padding (or a NaN)
    const int64_t parent = first_row + index[c] / vocab, token = index[c] % vocab;
    if (token != o.eos) {
      if (picks.size() < beam) picks.push_back({parent, token, score[c]});
    } else if (c < beam && s.finalized.size() < beam) {
      Hypothesis h;
      h.tokens = beams[static_cast<size_t>(parent)].tokens;
      h.tokens.push_back(o.eos);
      h.logprob = score[c];
      h.score = h.logprob / length_divisor(static_cast<int64_t>(h.tokens.size()), o);
      s.finalized.push_back(std::move(h));
    }
  }
  return picks;
}

// The highest score, the first of equals (fairseq sorts its finalized list with a stable sort).
Hypothesis best_of(const std::vector<Hypothesis>& finalized) {
  Hypothesis best = no_hypothesis();
  for (const Hypothesis& h : finalized) {
    if (h.score > best.score) best = h;
  }
  return best;
}

Transition transition(std::vector<Sentence>& live, const std::vector<Beam>& beams, const Candidates& cand,
                      int64_t vocab, const BeamOptions& o, std::vector<Hypothesis>& out) {
  Transition t;
  const size_t rows_per = beams.size() / live.size(), k = 2 * static_cast<size_t>(o.beam);
  const double* score = cand.score.data_ptr<double>();
  const int64_t* index = cand.index.data_ptr<int64_t>();
  for (size_t i = 0; i < live.size(); ++i) {
    Sentence& s = live[i];
    const auto first = static_cast<int64_t>(i * rows_per);
    std::vector<Pick> picks = advance(s, score + i * k, index + i * k, first, beams, vocab, o);
    // fairseq's early stop: `beam` finalized hypotheses end the sentence, though a live row might still overtake
    // them under the length penalty.
    if (picks.empty() || s.finalized.size() >= static_cast<size_t>(o.beam)) {
      out[static_cast<size_t>(s.id)] = best_of(s.finalized);
      continue;
    }
    // Dead rows keep every sentence at `beam` rows (a rectangular [S, beam * V] pool); at -inf they never yield a
    // candidate. Any token will do for the decoder; EOS is one it surely knows.
    while (picks.size() < static_cast<size_t>(o.beam)) picks.push_back({first, o.eos, kNegInf});
    for (const Pick& p : picks) {
      Beam b{beams[static_cast<size_t>(p.parent)].tokens, p.logprob};
      b.tokens.push_back(p.token);
      t.beams.push_back(std::move(b));
      t.parents.push_back(p.parent);
      t.tokens.push_back(p.token);
    }
    t.live.push_back(std::move(s));
  }
  return t;
}

}  // namespace

double length_divisor(int64_t length, const BeamOptions& options) {
  const auto len = static_cast<double>(length);
  if (options.penalty == "fairseq") return std::pow(len, options.len_penalty);
  if (options.penalty == "gnmt") return std::pow((5.0 + len) / 6.0, options.len_penalty);
  throw std::invalid_argument("length_divisor: unknown penalty '" + options.penalty + "' (fairseq or gnmt)");
}

std::vector<Hypothesis> beam_search(StepDecoder& decoder, int64_t batch, const BeamOptions& options) {
  check_options(options, batch);
  if (options.beam < 1) throw std::invalid_argument("beam_search: beam must be >= 1");
  std::vector<Hypothesis> out(static_cast<size_t>(batch));
  std::vector<Sentence> live(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) live[static_cast<size_t>(i)].id = i;
  // One row per sentence at first: its `beam` rows would all be equal, and fairseq scores only the first of them.
  std::vector<Beam> beams(static_cast<size_t>(batch));
  torch::Tensor feed = torch::full({batch}, options.bos, torch::kLong);
  for (int64_t step = 0; !live.empty(); ++step) {
    const torch::Tensor lp = next_logprobs(decoder, feed, step, options);
    const Candidates cand = top_candidates(lp, beams, static_cast<int64_t>(live.size()), options.beam);
    Transition t = transition(live, beams, cand, lp.size(1), options, out);
    if (t.live.empty()) break;  // at step max_len at the latest: only EOS can follow, so nothing goes on
    decoder.reorder(torch::tensor(t.parents, torch::kLong).to(lp.device()));
    feed = torch::tensor(t.tokens, torch::kLong).to(lp.device());
    live = std::move(t.live);
    beams = std::move(t.beams);
  }
  return out;
}

std::vector<Hypothesis> greedy_search(StepDecoder& decoder, int64_t batch, const BeamOptions& options) {
  check_options(options, batch);
  std::vector<Hypothesis> out(static_cast<size_t>(batch));
  std::vector<int64_t> live(static_cast<size_t>(batch));  // sentence of each decoder row
  std::iota(live.begin(), live.end(), int64_t{0});
  torch::Tensor feed = torch::full({batch}, options.bos, torch::kLong);
  for (int64_t step = 0; !live.empty(); ++step) {
    const torch::Tensor lp = next_logprobs(decoder, feed, step, options);
    const auto [best, arg] = lp.max(1);
    const torch::Tensor value = best.to(torch::kCPU).contiguous(), token = arg.to(torch::kCPU).contiguous();
    std::vector<int64_t> rows, tokens, next;
    for (size_t r = 0; r < live.size(); ++r) {
      Hypothesis& h = out[static_cast<size_t>(live[r])];
      const double v = value.data_ptr<double>()[r];
      const int64_t tok = token.data_ptr<int64_t>()[r];
      if (!(v > kNegInf)) {  // nothing possible: the answer beam search gives such a sentence
        h = no_hypothesis();
        continue;
      }
      h.tokens.push_back(tok);
      h.logprob += v;
      if (tok == options.eos) {
        h.score = h.logprob / length_divisor(static_cast<int64_t>(h.tokens.size()), options);
        continue;
      }
      rows.push_back(static_cast<int64_t>(r));
      tokens.push_back(tok);
      next.push_back(live[r]);
    }
    if (next.empty()) break;
    // Rows are only ever dropped here, so the decoder is left alone when no sentence ended.
    if (next.size() < live.size()) decoder.reorder(torch::tensor(rows, torch::kLong).to(lp.device()));
    feed = torch::tensor(tokens, torch::kLong).to(lp.device());
    live = std::move(next);
  }
  return out;
}

}  // namespace fwlab

#include "worker/dataset.h"

#include <fmt/format.h>

#include <random>

#include "worker/corpus.h"
#include "worker/tokenizer.h"

namespace fwlab {

uint64_t mix_seed(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t z = seed ^ (a * 0x9E3779B97F4A7C15ull) ^ (b * 0xC2B2AE3D27D4EB4Full);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

LmCorpus load_corpus(const DataSpec& spec, int64_t model_vocab) {
  LmCorpus c;
  if (spec.source == "tokens") {
    auto t = load_uint16_tokens(spec.path, model_vocab);
    c.train = std::move(t.train);
    c.valid = std::move(t.valid);
    c.test = std::move(t.test);
    c.vocab = model_vocab;
    c.tokenizer = "pretokenized";
    return c;
  }
  TextSplits text = spec.source == "brown"         ? load_brown(spec.path)
                    : spec.source == "wikitext103" ? load_wikitext(spec.path)
                                                   : load_enwik8(spec.path);
  std::unique_ptr<Tokenizer> tok;
  if (spec.tokenizer == "byte") tok = std::make_unique<ByteTokenizer>();
  else tok = std::make_unique<Gpt2Bpe>(spec.bpe_dir + "/encoder.json", spec.bpe_dir + "/vocab.bpe");
  c.train = tok->encode(text.train);
  c.valid = tok->encode(text.valid);
  c.test = tok->encode(text.test);
  c.vocab = tok->vocab_size();
  c.byte_level = tok->byte_level();
  c.tokenizer = tok->name();
  return c;
}

std::vector<int32_t> sample_windows(const std::vector<int32_t>& tokens, int64_t batch, int64_t len, uint64_t seed) {
  const auto n = static_cast<int64_t>(tokens.size());
  if (n < len) throw DataError(fmt::format("the training split has {} tokens, fewer than one window of {}", n, len));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> start(0, n - len);
  std::vector<int32_t> out(static_cast<size_t>(batch * len));
  for (int64_t b = 0; b < batch; ++b) {
    const auto s = start(rng);
    std::copy(tokens.begin() + s, tokens.begin() + s + len, out.begin() + b * len);
  }
  return out;
}

std::vector<EvalWindow> eval_windows(int64_t n_tokens, int64_t T, bool last_half, int64_t max_tokens) {
  std::vector<EvalWindow> out;
  const int64_t stride = last_half ? std::max<int64_t>(1, T / 2) : T;
  int64_t scored = 0;
  for (int64_t start = 0; start + T + 1 <= n_tokens; start += stride) {
    EvalWindow w{start, (last_half && start > 0) ? T - stride : 0};
    out.push_back(w);
    scored += T - w.score_from;
    if (max_tokens > 0 && scored >= max_tokens) break;
  }
  return out;
}

}  // namespace fwlab

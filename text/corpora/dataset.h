// Token streams for language modelling and the deterministic choice of training and evaluation windows.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "contract/job/job_spec.h"
#include "text/corpora/corpus.h"
#include "text/corpora/token_stream.h"
#include "text/tokenizers/tokenizer.h"

namespace fwlab {

struct LmCorpus {
  TokenStream train, valid, test;  // test may be empty (nanoGPT's prepared corpora have train and val only)
  int64_t vocab = 0;
  bool byte_level = false;  // one token per byte: loss / ln 2 is bits per byte (character)
  std::string tokenizer;
  std::string cache_dir;  // GPT-2 BPE and hf: tokenizers: where the tokenized splits are cached
  bool cache_hit = false;
};

// Loads the spec's source and tokenises it (throws DataError naming the file at fault).
LmCorpus load_corpus(const DataSpec& spec, int64_t model_vocab);

// The corpus's text splits (brown, wikitext103, enwik8; throws DataError for other sources).
TextSplits load_text(const DataSpec& spec);

// The tokenizer data.tokenizer names (byte, gpt2 with data.bpe_dir, hf:DIR).
std::unique_ptr<Tokenizer> data_tokenizer(const DataSpec& spec);

// splitmix64 of (seed, a, b): independent streams for step a, micro-batch b, ...
uint64_t mix_seed(uint64_t seed, uint64_t a, uint64_t b = 0);

// `batch` windows of `len` contiguous tokens at uniformly random starts; a pure function of `seed`, so a resumed
// run draws exactly the batches it would have drawn. Row-major [batch, len].
std::vector<int32_t> sample_windows(const TokenStream& tokens, int64_t batch, int64_t len, uint64_t seed);

// Evaluation windows of T + 1 tokens over a split. Non-overlapping windows score every target; with
// `last_half` (T2R's protocol) windows advance by T/2 and score only their last T/2 targets (the first window
// scores all), so every token is predicted once with at least T/2 tokens of context. `max_tokens` > 0 caps the
// number of scored targets.
struct EvalWindow {
  int64_t start = 0;       // first token of the window
  int64_t score_from = 0;  // first scored target position within the window (0 .. T-1)
};
std::vector<EvalWindow> eval_windows(int64_t n_tokens, int64_t T, bool last_half, int64_t max_tokens);

}  // namespace fwlab

#include "text/corpora/dataset.h"

#include <fmt/format.h>

#include <cctype>
#include <filesystem>
#include <random>

#include "text/corpora/corpus.h"
#include "text/tokenizers/hf_tokenizer.h"
#include "text/corpora/token_cache.h"
#include "text/tokenizers/tokenizer.h"

namespace fwlab {

namespace fs = std::filesystem;

uint64_t mix_seed(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t z = seed ^ (a * 0x9E3779B97F4A7C15ull) ^ (b * 0xC2B2AE3D27D4EB4Full);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

namespace {

std::vector<fs::path> corpus_files(const DataSpec& spec) {
  if (spec.source == "brown") {
    const auto names = brown_files(spec.path);
    return {names.begin(), names.end()};
  }
  if (spec.source == "wikitext103")
    return {fs::path(spec.path) / "wiki.train.raw", fs::path(spec.path) / "wiki.valid.raw",
            fs::path(spec.path) / "wiki.test.raw"};
  return {fs::path(spec.path)};
}

// The text tokenized with `tok` through the token cache; `files` (the tokenizer's) and `cache_name` enter its key,
// and the name is also the cache directory's middle part, so it must be a plain file name.
LmCorpus cached_corpus(const DataSpec& spec, const Tokenizer& tok, std::vector<fs::path> files,
                       const std::string& cache_name) {
  TokenizeRequest request{
      spec.source, corpus_files(spec), std::move(files), cache_name, tok.vocab_size(), [&] {
        const auto text = load_text(spec);
        return std::vector<std::vector<int32_t>>{tok.encode(text.train), tok.encode(text.valid), tok.encode(text.test)};
      }};
  auto splits = cached_tokenization(request);
  LmCorpus c;
  c.train = std::move(splits.train);
  c.valid = std::move(splits.valid);
  c.test = std::move(splits.test);
  c.vocab = tok.vocab_size();
  c.tokenizer = tok.name();
  c.cache_dir = splits.cache_dir;
  c.cache_hit = splits.hit;
  return c;
}

// "hf-" and the directory's name, reduced to characters safe in a file name ("hf-Llama-3.2-1B").
std::string hf_cache_name(const std::string& dir) {
  std::string name = "hf-" + fs::path(dir).lexically_normal().filename().string();
  if (name == "hf-") name = "hf-" + fs::path(dir).lexically_normal().parent_path().filename().string();  // "DIR/"
  for (auto& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '-' && ch != '_') ch = '_';
  return name;
}

}  // namespace

LmCorpus load_corpus(const DataSpec& spec, int64_t model_vocab) {
  LmCorpus c;
  if (spec.source == "tokens") {
    auto t = map_token_files(spec.path, spec.token_dtype == "uint32" ? 4 : 2, model_vocab);
    c.train = std::move(t.train);
    c.valid = std::move(t.valid);
    c.test = std::move(t.test);
    c.vocab = model_vocab;
    c.tokenizer = "pretokenized";
    return c;
  }
  if (spec.tokenizer == "byte") {  // a byte is its own id: nothing worth caching
    ByteTokenizer tok;
    const auto text = load_text(spec);
    c.train = TokenStream(tok.encode(text.train));
    c.valid = TokenStream(tok.encode(text.valid));
    c.test = TokenStream(tok.encode(text.test));
    c.vocab = tok.vocab_size();
    c.byte_level = true;
    c.tokenizer = tok.name();
    return c;
  }
  if (spec.hf_tokenizer()) {  // each split is one text to encode: the post-processor's BOS / EOS at its ends
    const auto dir = spec.hf_tokenizer_dir();
    const auto tok = load_hf_tokenizer(dir);
    return cached_corpus(spec, *tok, hf_tokenizer_files(dir), hf_cache_name(dir));
  }
  const auto encoder = spec.bpe_dir + "/encoder.json", merges = spec.bpe_dir + "/vocab.bpe";
  const Gpt2Bpe tok(encoder, merges);
  return cached_corpus(spec, tok, {encoder, merges}, tok.name());
}

TextSplits load_text(const DataSpec& spec) {
  if (spec.source != "brown" && spec.source != "wikitext103" && spec.source != "enwik8")
    throw DataError(fmt::format("data.source '{}' holds no text", spec.source));
  return spec.source == "brown"         ? load_brown(spec.path)
         : spec.source == "wikitext103" ? load_wikitext(spec.path)
                                        : load_enwik8(spec.path);
}

std::unique_ptr<Tokenizer> data_tokenizer(const DataSpec& spec) {
  if (spec.hf_tokenizer()) return load_hf_tokenizer(spec.hf_tokenizer_dir());
  if (spec.tokenizer == "byte") return std::make_unique<ByteTokenizer>();
  return std::make_unique<Gpt2Bpe>(spec.bpe_dir + "/encoder.json", spec.bpe_dir + "/vocab.bpe");
}

std::vector<int32_t> sample_windows(const TokenStream& tokens, int64_t batch, int64_t len, uint64_t seed) {
  const auto n = tokens.size();
  if (n < len) throw DataError(fmt::format("the training split has {} tokens, fewer than one window of {}", n, len));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> start(0, n - len);
  std::vector<int32_t> out(static_cast<size_t>(batch * len));
  for (int64_t b = 0; b < batch; ++b) {
    const auto s = start(rng);
    tokens.copy(s, len, out.data() + b * len);
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

// A translation job's keys (kind = "translate", data.source = "parallel"): read and checked here so that
// parse_job_spec only calls in. Each is refused by name where it would change nothing.
#include <fmt/format.h>

#include <filesystem>

#include "contract/job/job_spec.h"
#include "contract/job/spec_reader.h"

namespace fwlab {

using namespace spec_reader;

namespace {

constexpr int64_t kMaxAveraged = 1000;

void check_parallel_data(const Reader& d, const DataSpec& data) {
  const bool parallel = data.source == "parallel";
  for (const char* key : {"src", "tgt", "vocab", "vocab_size"})
    require(parallel || !d.has(key), d.field(key),
            fmt::format("is a parallel corpus's key; data.source is '{}'", data.source));
  if (!parallel) return;
  require(!data.src.empty() && !data.tgt.empty(), d.field(data.src.empty() ? "src" : "tgt"),
          "a parallel corpus needs both languages: data.src and data.tgt name the file suffixes (train.de, train.en)");
  require(data.src != data.tgt, d.field("tgt"), fmt::format("is the source language too ('{}')", data.src));
  require(data.vocab.empty() != (data.vocab_size == 0), d.field("vocab_size"),
          "give one vocabulary: vocab (a SentencePiece model file) or vocab_size (a joint BPE learned on the training "
          "split)");
  require(data.vocab_size >= 0 && data.vocab_size <= (int64_t{1} << 20), d.field("vocab_size"),
          fmt::format("must be in [0, {}], got {}", int64_t{1} << 20, data.vocab_size));
  require(d.has("tokenizer") == false, d.field("tokenizer"),
          "a parallel corpus is read with its joint vocabulary (data.vocab or data.vocab_size)");
}

void check_translate(const Reader& t, const JobSpec& s) {
  const auto& x = s.translate;
  require(x.label_smoothing >= 0 && x.label_smoothing < 1, t.field("label_smoothing"),
          fmt::format("must be in [0, 1), got {}", x.label_smoothing));
  require(x.average_last >= 1 && x.average_last <= kMaxAveraged, t.field("average_last"),
          fmt::format("must be in [1, {}] (1: the last checkpoint alone), got {}", kMaxAveraged, x.average_last));
  require(x.batch_tokens > 0 && x.batch_tokens <= (int64_t{1} << 24), t.field("batch_tokens"),
          fmt::format("must be in [1, 2^24], got {}", x.batch_tokens));
  require(x.beam >= 1 && x.beam <= 1024, t.field("beam"),
          fmt::format("must be in [1, 1024] (1: greedy), got {}", x.beam));
  require(x.len_penalty >= 0 && x.len_penalty <= 10, t.field("len_penalty"),
          fmt::format("must be in [0, 10], got {}", x.len_penalty));
  one_of(x.penalty, {"fairseq", "gnmt"}, t.field("penalty"));
  require(x.max_len_a >= 0 && x.max_len_a <= 100, t.field("max_len_a"),
          fmt::format("must be in [0, 100], got {}", x.max_len_a));
  require(x.max_len_b >= 0 && x.max_len_b <= (int64_t{1} << 20), t.field("max_len_b"),
          fmt::format("must be >= 0, got {}", x.max_len_b));
  require(x.max_len_a > 0 || x.max_len_b > 0, t.field("max_len_b"),
          "max_len_a and max_len_b are both 0: no output could be generated");
  require(x.decode_batch >= 1 && x.decode_batch <= 4096, t.field("decode_batch"),
          fmt::format("must be in [1, 4096], got {}", x.decode_batch));
  require(x.test_limit >= 0, t.field("test_limit"), fmt::format("must be >= 0 (0: all), got {}", x.test_limit));
}

}  // namespace

std::string DataSpec::vocab_path() const {
  if (vocab.empty()) return "";
  const std::filesystem::path p(vocab);
  return p.is_absolute() ? vocab : (std::filesystem::path(path) / p).string();
}

void read_parallel_data(Reader& d, DataSpec& data) {
  d.get("src", data.src);
  d.get("tgt", data.tgt);
  d.get("vocab", data.vocab);
  d.get("vocab_size", data.vocab_size);
  check_parallel_data(d, data);
}

void read_translate_spec(Reader& r, JobSpec& s) {
  auto t = r.sub("translate");
  auto& x = s.translate;
  t.get("label_smoothing", x.label_smoothing);
  t.get("average_last", x.average_last);
  t.get("batch_tokens", x.batch_tokens);
  t.get("beam", x.beam);
  t.get("len_penalty", x.len_penalty);
  t.get("penalty", x.penalty);
  t.get("max_len_a", x.max_len_a);
  t.get("max_len_b", x.max_len_b);
  t.get("decode_batch", x.decode_batch);
  t.get("test_limit", x.test_limit);
  t.reject_unknown();
  const bool translate = s.kind == "translate";
  require(translate || t.json().empty(), "translate",
          fmt::format("is read by kind 'translate' only; this job is kind '{}'", s.kind));
  require(translate == (s.data.source == "parallel"), translate ? "data.source" : "kind",
          translate ? fmt::format("kind 'translate' reads a parallel corpus (data.source = \"parallel\"), not '{}'",
                                  s.data.source)
                    : "a parallel corpus is read by kind 'translate'");
  if (!translate) return;
  check_translate(t, s);
  // Keys of language-model jobs that a translation job does not read: sentences are as long as they are (up to
  // model.context), every parameter trains in fp32, each evaluation is a checkpoint, and the test is decoded.
  const std::pair<const char*, std::vector<const char*>> unread[] = {
      {"train", {"seq_len", "trainable", "precision", "checkpoint_every", "batch_size"}},
      {"eval", {"max_tokens", "last_half", "test", "mqar_batches", "batch_size"}}};
  for (const auto& [section, keys] : unread)
    for (const char* key : keys)
      require(!r.json().contains(section) || !r.json()[section].contains(key), fmt::format("{}.{}", section, key),
              "changes nothing in a translation job (translate.batch_tokens sets its batches)");
}

void check_translate_model(const JobSpec& s, const ModelConfig& cfg) {
  if (s.kind != "translate") {
    require(!cfg.encoder_decoder() || s.kind == "generation-bench", "model.encoder_layers",
            fmt::format("an encoder-decoder is trained by kind 'translate' (and timed by 'generation-bench'), not '{}'",
                        s.kind));
    return;
  }
  require(cfg.encoder_decoder(), "model.encoder_layers",
          "kind 'translate' trains an encoder-decoder: set model.encoder_layers > 0");
  require(s.data.vocab_size == 0 || cfg.vocab >= s.data.vocab_size, "model.vocab",
          fmt::format("{} is smaller than data.vocab_size = {}", cfg.vocab, s.data.vocab_size));
}

}  // namespace fwlab

// The test split of a translation job: decoded in batches of similar source lengths, scored with BLEU two ways.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "contract/evaluation/bleu.h"
#include "models/seq2seq/translate.h"
#include "worker/translate_job.h"

namespace fwlab {

namespace fs = std::filesystem;

namespace {

std::string detokenize(const SentencePieceModel& sp, const std::vector<int64_t>& tokens) {
  std::vector<int> ids;
  for (auto t : tokens)
    if (t != kEosId) ids.push_back(static_cast<int>(t));
  const auto bytes = sp.decode(ids);
  return std::string(bytes.begin(), bytes.end());
}

BeamOptions beam_options(const TranslateSpec& t) {
  BeamOptions o;
  o.beam = t.beam, o.len_penalty = t.len_penalty, o.penalty = t.penalty;
  o.bos = kBosId, o.eos = kEosId, o.pad = kPadId;
  return o;
}

struct Decoded {
  std::vector<std::string> hypotheses;
  int64_t tokens = 0;  // generated, EOS included
  double seconds = 0;
};

// Sources sorted by length so that a batch pads little; each batch's output limit is a * its longest source + b
// (fairseq's max_len_a / max_len_b), within the model's context.
Decoded decode_all(Seq2Seq& model, const SentencePieceModel& sp, const std::vector<TokenPair>& test,
                   const TranslateSpec& t, torch::Device device) {
  std::vector<size_t> order(test.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return test[a].source.size() < test[b].source.size(); });
  Decoded out;
  out.hypotheses.resize(test.size());
  auto options = beam_options(t);
  const auto started = std::chrono::steady_clock::now();
  for (size_t first = 0; first < order.size(); first += static_cast<size_t>(t.decode_batch)) {
    std::vector<size_t> rows(order.begin() + static_cast<std::ptrdiff_t>(first),
                             order.begin() + static_cast<std::ptrdiff_t>(
                                                 std::min(order.size(), first + static_cast<size_t>(t.decode_batch))));
    const auto batch = collate(test, rows, device);
    const auto longest = static_cast<double>(batch.src.size(1));
    options.max_len = std::min(model->config().context - 1, static_cast<int64_t>(t.max_len_a * longest) + t.max_len_b);
    const auto found = translate(model, batch.src, options);
    for (size_t i = 0; i < rows.size(); ++i) {
      out.hypotheses[rows[i]] = detokenize(sp, found[i].tokens);
      out.tokens += static_cast<int64_t>(found[i].tokens.size());
    }
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return out;
}

void write_lines(const fs::path& path, const std::vector<std::string>& lines) {
  std::ofstream out(path.string() + ".tmp");
  for (const auto& l : lines) out << l << '\n';
  out.close();
  fs::rename(path.string() + ".tmp", path);  // a reader never sees half a file
}

nlohmann::json bleu_json(const BleuScore& b) {
  return {{"bleu", b.bleu},       {"precisions", b.precisions}, {"brevity_penalty", b.brevity_penalty},
          {"sys_len", b.sys_len}, {"ref_len", b.ref_len},       {"signature", b.signature}};
}

}  // namespace

void translate_test(Seq2Seq& model, const SentencePieceModel& sp, const ParallelData& data, const JobSpec& spec,
                    const std::string& job_dir, int64_t step, EventLog& log) {
  model->eval();
  const auto decoded = decode_all(model, sp, data.test, spec.translate, torch::Device(spec.device));
  const auto dir = fs::path(job_dir) / "translations";
  fs::create_directories(dir);
  write_lines(dir / "test.hyp", decoded.hypotheses);
  write_lines(dir / "test.ref", data.test_references);
  const auto tokenized = tokenized_bleu(decoded.hypotheses, data.test_references);
  const auto sacre = sacre_bleu(decoded.hypotheses, data.test_references);
  log.write(MetricEvent{"bleu", step, tokenized.bleu});
  log.write(MetricEvent{"sacrebleu", step, sacre.bleu});
  const auto& t = spec.translate;
  log.write({{"type", "translation"},
             {"split", "test"},
             {"sentences", decoded.hypotheses.size()},
             {"truncated_sources", data.truncated_test},
             {"beam", t.beam},
             {"len_penalty", t.len_penalty},
             {"penalty", t.penalty},
             {"max_len_a", t.max_len_a},
             {"max_len_b", t.max_len_b},
             {"generated_tokens", decoded.tokens},
             {"seconds", decoded.seconds},
             {"tokens_per_second", decoded.seconds > 0 ? decoded.tokens / decoded.seconds : 0.0},
             {"tokenized_bleu", bleu_json(tokenized)},
             {"sacrebleu", bleu_json(sacre)}});
  fmt::print(stderr, "fwlab-worker: test BLEU {:.2f} (tokenized), {:.2f} ({}); {} sentences in {:.1f}s\n",
             tokenized.bleu, sacre.bleu, sacre.signature, decoded.hypotheses.size(), decoded.seconds);
}

}  // namespace fwlab

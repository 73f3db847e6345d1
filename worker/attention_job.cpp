// kind = "attention": T2R's attention analysis (Figs. 5-6) as a job. The student is init_checkpoint's model
// (converted to the job's `model` when given: the converted model before any fine-tuning); the teacher is the
// softmax model it came from. Both read the same validation windows; the record gets the mean distance and
// entropies overall, per layer and per head.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "contract/formats/corpus_files.h"
#include "contract/job/inputs.h"
#include "models/attention_analysis.h"
#include "models/hf_import.h"
#include "text/corpora/dataset.h"
#include "worker/teacher_chain.h"
#include "worker/trainer.h"

namespace fwlab {

namespace fs = std::filesystem;

namespace {

// attention.teacher, or the nearest softmax-only model up the chain of source checkpoints.
std::string find_teacher(const JobSpec& spec) {
  return spec.attention.teacher.empty() ? nearest_softmax_model(spec.init_checkpoint, "attention.teacher")
                                        : spec.attention.teacher;
}

double mean_of(const std::vector<double>& sums, int64_t queries) {
  double total = 0;
  for (double v : sums) total += v;
  return total / static_cast<double>(sums.size()) / static_cast<double>(queries);
}

void write_stats(const AttentionStats& stats, EventLog& log) {
  const struct {
    const char* key;
    const std::vector<std::vector<double>>& sums;
  } metrics[] = {
      {"attn_distance", stats.distance}, {"attn_entropy", stats.entropy}, {"teacher_entropy", stats.teacher_entropy}};
  for (const auto& m : metrics) {
    std::vector<double> all;
    for (size_t row = 0; row < stats.layers.size(); ++row) {
      const auto& heads = m.sums[row];
      all.insert(all.end(), heads.begin(), heads.end());
      log.write(MetricEvent{fmt::format("{}.l{}", m.key, stats.layers[row]), 0, mean_of(heads, stats.queries)});
      for (size_t h = 0; h < heads.size(); ++h)
        log.write(MetricEvent{fmt::format("{}.l{}.h{}", m.key, stats.layers[row], h), 0,
                              heads[h] / static_cast<double>(stats.queries)});
    }
    log.write(MetricEvent{m.key, 0, mean_of(all, stats.queries)});
  }
}

}  // namespace

int run_attention_analysis(const JobSpec& spec, const std::string& job_dir, EventLog& log) {
  const torch::Device device(spec.device);
  GPT student = build_model(spec, &log);
  const auto teacher_path = find_teacher(spec);
  GPT teacher = load_source_model(teacher_path, nullptr, spec.model_dtype);
  student->to(device), teacher->to(device);
  student->eval(), teacher->eval();
  if (student->config().layers.size() != teacher->config().layers.size() ||
      student->config().n_heads != teacher->config().n_heads)
    throw SpecError("attention.teacher", fmt::format("{} has {} layers of {} heads, the model {} of {}", teacher_path,
                                                     teacher->config().layers.size(), teacher->config().n_heads,
                                                     student->config().layers.size(), student->config().n_heads));
  log.write(start_event(spec, job_dir, student));
  write_status(job_dir, StatusFile{JobStatus::running, {}, "", "", {{"pid", static_cast<int64_t>(getpid())}}});

  const auto corpus = load_corpus(spec.data, student->config().vocab);
  const int64_t T = spec.train.seq_len, B = spec.train.batch_size;
  if (T > student->config().context)
    throw SpecError("train.seq_len", fmt::format("{} exceeds the model's context of {}", T, student->config().context));
  const auto windows = eval_windows(corpus.valid.size(), T, false, spec.attention.max_tokens);
  if (windows.empty())
    throw DataError(fmt::format("the validation split of {} tokens holds no window of {}", corpus.valid.size(), T + 1));
  AttentionStats stats;
  for (size_t i = 0; i < windows.size(); i += static_cast<size_t>(B)) {
    const size_t n = std::min(windows.size() - i, static_cast<size_t>(B));
    std::vector<int32_t> ids(n * static_cast<size_t>(T));
    for (size_t r = 0; r < n; ++r) corpus.valid.copy(windows[i + r].start, T, ids.data() + r * static_cast<size_t>(T));
    const auto idx = torch::from_blob(ids.data(), {static_cast<int64_t>(n), T}, torch::kInt32).to(device, torch::kLong);
    add_attention_stats(student, teacher, idx, stats);
  }
  if (stats.layers.empty())
    throw SpecError("model",
                    "no layer of the model and its teacher has attention weights to compare (SRU layers have none)");
  log.write({{"type", "attention"},
             {"teacher", teacher_path},
             {"layers", stats.layers},
             {"windows", windows.size()},
             {"tokens", stats.queries}});
  write_stats(stats, log);
  log.write(EndEvent{JobStatus::finished, kExitFinished, "", "", nlohmann::json::object()});
  write_status(job_dir, StatusFile{JobStatus::finished, kExitFinished, "", "", nlohmann::json::object()});
  return kExitFinished;
}

}  // namespace fwlab

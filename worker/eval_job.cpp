// kind = "eval": a checkpoint (or hf:DIR, converted to `model` when given) scored on each of its tasks. Metrics go
// to the record as "NAME.METRIC" at step 0 (acc, acc_stderr, acc_norm, ppl, contains, passkey's acc.L{len}.d{depth},
// mqar's seq_acc and acc.L{len}.n{pairs});
// every document's scores go to JOB/tasks/NAME.jsonl, so that a result can be questioned document by document.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "contract/formats/corpus_files.h"
#include "text/corpora/dataset.h"
#include "worker/eval_tasks.h"
#include "worker/trainer.h"

namespace fwlab {

namespace fs = std::filesystem;

namespace {

// Passkey's filler: the corpus's test text (landmark's repeated sentences with filler = "repeat").
std::string filler_text(const JobSpec& spec, const TaskSpec& task) {
  if (task.filler == "repeat") return "";
  auto text = load_text(spec.data).test;
  if (text.empty()) throw DataError("passkey: the corpus's test split is empty; set filler = \"repeat\"");
  return text;
}

// `tok`: the data's tokenizer; nullptr for generated data, which only the mqar adapter takes (check_task_sources).
TaskRun run_task(GPT& model, const Tokenizer* tok, const JobSpec& spec, const TaskSpec& task) {
  const auto& adapter = *find_task_adapter(task.adapter);
  switch (adapter.kind) {
    case TaskKind::multiple_choice:
    case TaskKind::loglikelihood:
      return run_choice_task(model, *tok, task, adapter, spec.eval.batch_size);
    case TaskKind::recall:
      return run_recall_task(model, *tok, task, adapter, spec.eval.batch_size);
    case TaskKind::passkey:
      return run_passkey_task(model, *tok, task, filler_text(spec, task), spec.eval.batch_size, spec.seed);
    case TaskKind::mqar:
      return run_mqar_task(model, spec);
  }
  throw std::logic_error("unhandled task kind");
}

void write_records(const std::string& job_dir, const std::string& name, const std::vector<nlohmann::json>& records) {
  fs::create_directories(fs::path(job_dir) / "tasks");
  const auto path = fs::path(job_dir) / "tasks" / (name + ".jsonl");
  std::ofstream out(path.string() + ".tmp");
  // Generated text may end inside a UTF-8 sequence (a byte-level token): written with U+FFFD there.
  for (const auto& r : records) out << r.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  out.close();
  fs::rename(path.string() + ".tmp", path);  // a reader never sees half a file
}

}  // namespace

int run_eval(const JobSpec& spec, const std::string& job_dir, EventLog& log) {
  GPT model = build_model(spec, &log);
  model->to(torch::Device(spec.device));
  const auto tok = spec.data.generated() ? nullptr : data_tokenizer(spec.data);
  if (tok && tok->vocab_size() > model->config().vocab)
    throw SpecError("data.tokenizer", fmt::format("the {} tokenizer has {} tokens, the model {}", tok->name(),
                                                  tok->vocab_size(), model->config().vocab));
  log.write(start_event(spec, job_dir, model));
  write_status(job_dir, StatusFile{JobStatus::running, {}, "", "", {{"pid", static_cast<int64_t>(getpid())}}});
  for (const auto& [name, task] : spec.tasks) {
    const auto started = std::chrono::steady_clock::now();
    const auto run = run_task(model, tok.get(), spec, task);
    write_records(job_dir, name, run.records);
    nlohmann::json metrics = nlohmann::json::object();
    for (const auto& [key, value] : run.metrics) {
      log.write(MetricEvent{name + "." + key, 0, value});
      metrics[key] = value;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    log.write({{"type", "task"},
               {"name", name},
               {"adapter", task.adapter},
               {"documents", run.records.size()},
               {"metrics", metrics},
               {"seconds", seconds},
               {"semantics", find_task_adapter(task.adapter)->semantics}});
    fmt::print(stderr, "fwlab-worker: {}: {} documents in {:.1f}s\n", name, run.records.size(), seconds);
  }
  log.write(EndEvent{JobStatus::finished, kExitFinished, "", "", nlohmann::json::object()});
  write_status(job_dir, StatusFile{JobStatus::finished, kExitFinished, "", "", nlohmann::json::object()});
  return kExitFinished;
}

}  // namespace fwlab

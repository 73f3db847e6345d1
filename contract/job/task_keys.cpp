// job.json's `tasks`: { NAME: { adapter, path, ... } } for kind = "eval".
#include <fmt/format.h>

#include "contract/evaluation/eval_task.h"
#include "contract/job/job_spec.h"
#include "contract/job/spec_reader.h"

namespace fwlab {

using namespace spec_reader;

namespace {

// The keys each kind of adapter reads; any other key set on a task would silently change nothing.
std::vector<std::string> keys_read(TaskKind kind) {
  switch (kind) {
    case TaskKind::multiple_choice:
    case TaskKind::loglikelihood:
      return {"adapter", "path", "limit", "num_fewshot", "fewshot_path", "fewshot_seed"};
    case TaskKind::recall:
      return {"adapter", "path", "limit", "context_length", "max_new_tokens"};
    case TaskKind::passkey:
      return {"adapter", "lengths", "depths", "trials", "filler", "max_new_tokens"};
    case TaskKind::mqar:  // its points, batches and seeds are the job's data.mqar and eval keys
      return {"adapter"};
  }
  return {};
}

void check_applies(const Reader& r, const TaskAdapter& adapter, const std::string& field) {
  const auto allowed = keys_read(adapter.kind);
  for (const auto& [key, value] : r.json().items())
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      throw SpecError(field + "." + key, fmt::format("the {} adapter does not read it (it reads {})", adapter.name,
                                                     fmt::join(allowed, ", ")));
  if (adapter.first_n_shots && r.has("fewshot_seed"))
    throw SpecError(
        field + ".fewshot_seed",
        fmt::format("the {} adapter takes the first examples of the subject, not a seeded draw", adapter.name));
}

void check_task(const TaskSpec& t, const TaskAdapter& adapter, const std::string& f) {
  if (adapter.kind == TaskKind::passkey) {
    require(!t.lengths.empty(), f + ".lengths", "passkey needs its prompt lengths in tokens (lengths = [1024, 2048])");
    for (auto L : t.lengths)
      require(L >= 64 && L <= (int64_t{1} << 24), f + ".lengths", fmt::format("{} is not in [64, 2^24] tokens", L));
    require(!t.depths.empty(), f + ".depths", "must not be empty");
    for (auto d : t.depths)
      require(d >= 0 && d <= 100, f + ".depths", fmt::format("{} is not a percentage in [0, 100]", d));
    require(t.trials > 0 && t.trials <= 100000, f + ".trials", fmt::format("must be in [1, 100000], got {}", t.trials));
    one_of(t.filler, {"corpus", "repeat"}, f + ".filler");
  } else if (adapter.kind != TaskKind::mqar) {
    require(!t.path.empty(), f + ".path",
            fmt::format("the {} adapter reads a JSONL task file: set its path", adapter.name));
  }
  require(t.limit >= 0, f + ".limit", "must be >= 0 (0: every document)");
  require(t.num_fewshot >= 0 && t.num_fewshot <= 1000, f + ".num_fewshot",
          fmt::format("must be in [0, 1000], got {}", t.num_fewshot));
  require(t.num_fewshot == 0 || !t.fewshot_path.empty(), f + ".fewshot_path",
          "num_fewshot > 0 needs a file to draw the examples from");
  require(t.num_fewshot > 0 || t.fewshot_path.empty(), f + ".num_fewshot",
          "fewshot_path is set but num_fewshot is 0: the file would not be read");
  require(t.context_length >= 64 && t.context_length <= (int64_t{1} << 24), f + ".context_length",
          fmt::format("must be in [64, 2^24] tokens, got {}", t.context_length));
  require(t.max_new_tokens >= 0 && t.max_new_tokens <= 4096, f + ".max_new_tokens",
          fmt::format("must be in [0, 4096], got {}", t.max_new_tokens));
}

// Relative task paths name files of the fwlab source tree (data/tasks/...), as data = "brown" does.
std::string resolved(const std::string& path, const std::string& repo_root) {
  return path.empty() || path[0] == '/' ? path : repo_root + "/" + path;
}

TaskSpec parse_task(Reader r, const std::string& name, const std::string& field, const std::string& repo_root) {
  TaskSpec t;
  t.adapter = name;
  r.get("adapter", t.adapter);
  const auto* adapter = find_task_adapter(t.adapter);
  if (!adapter)
    throw SpecError(
        field + (r.has("adapter") ? ".adapter" : ""),
        fmt::format("'{}' is no task adapter{} (adapters: {}; a task named otherwise sets adapter = \"...\")",
                    t.adapter, did_you_mean(t.adapter, task_adapter_names()), fmt::join(task_adapter_names(), ", ")));
  check_applies(r, *adapter, field);
  r.get("path", t.path);
  r.get("limit", t.limit);
  r.get("num_fewshot", t.num_fewshot);
  r.get("fewshot_path", t.fewshot_path);
  r.get("fewshot_seed", t.fewshot_seed);
  r.get("context_length", t.context_length);
  r.get("max_new_tokens", t.max_new_tokens);
  r.get("lengths", t.lengths);
  r.get("depths", t.depths);
  r.get("trials", t.trials);
  r.get("filler", t.filler);
  check_task(t, *adapter, field);
  t.path = resolved(t.path, repo_root);
  t.fewshot_path = resolved(t.fewshot_path, repo_root);
  return t;
}

}  // namespace

void check_task_sources(const JobSpec& s) {
  for (const auto& [name, task] : s.tasks) {
    const bool mqar = find_task_adapter(task.adapter)->kind == TaskKind::mqar;
    if (mqar)
      require(s.data.source == "mqar", "tasks." + name,
              fmt::format("the mqar adapter scores the job's own MQAR test points: it needs data.source = \"mqar\" "
                          "(data.source is '{}')",
                          s.data.source));
    else
      require(!s.data.generated(), "tasks." + name,
              fmt::format("the {} adapter scores text, and data.source '{}' generates token ids without a tokenizer",
                          task.adapter, s.data.source));
  }
}

std::map<std::string, TaskSpec> parse_task_specs(const nlohmann::json* tasks, const std::string& kind,
                                                 const std::string& repo_root) {
  std::map<std::string, TaskSpec> out;
  if (!tasks) {
    require(kind != "eval", "tasks", "kind 'eval' needs its tasks: { NAME: { adapter, path, ... } }");
    return out;
  }
  require(kind == "eval", "tasks", fmt::format("only kind 'eval' runs tasks (this job is '{}')", kind));
  require(tasks->is_object() && !tasks->empty(), "tasks",
          "must be a non-empty object: { NAME: { adapter, path, ... } }");
  for (const auto& [name, value] : tasks->items()) {
    const auto field = "tasks." + name;
    require(!name.empty() && name.find_first_of(" ./\\\"'") == std::string::npos, field,
            "a task name is a plain word (it names metrics and table columns)");
    out[name] = parse_task(Reader(value, field + "."), name, field, repo_root);
  }
  return out;
}

}  // namespace fwlab

namespace fwlab {

std::vector<SpecError> task_context_problems(const JobSpec& spec, int64_t context) {
  std::vector<SpecError> out;
  for (const auto& [name, task] : spec.tasks)
    for (auto L : task.lengths)
      if (L + task.generated_tokens() > context)
        out.emplace_back("tasks." + name + ".lengths",
                         fmt::format("a prompt of {} tokens and {} generated ones exceed the model's context of {}", L,
                                     task.generated_tokens(), context));
  return out;
}

}  // namespace fwlab

#include "harness/plan.h"

#include "contract/model/named_rows.h"
#include "harness/derive.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "contract/job/file_identity.h"
#include "contract/formats/hf/checkpoint.h"
#include "contract/formats/safetensors_header.h"
#include "contract/job/inputs.h"
#include "contract/job/job_spec.h"
#include "contract/job/model_dtype.h"
#include "text/tokenizers/tokenizer_check.h"

namespace fwlab {

namespace fs = std::filesystem;

std::string coords_label(const nlohmann::json& coords) {
  std::string out;
  for (const auto& [k, v] : coords.items())
    out += (out.empty() ? "" : " ") + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
  return out.empty() ? "-" : out;
}

std::string data_identity(const nlohmann::json& data, const std::string& repo_root) {
  const std::string source = data.value("source", "brown");
  // Generated: the spec's mqar keys are part of the config already; the name versions the generator ("mqar-zoology":
  // distinct values, answers never shown; the earlier "mqar" drew values with replacement and showed each answer).
  if (source == "mqar") return "mqar-zoology";
  if (source == "retrieval") return "retrieval-schlag2021";
  std::string path = data.value("path", "");
  if (path.empty() && source == "brown") path = repo_root + "/data/brown";
  if (!path.empty() && fs::path(path).is_relative()) path = repo_root + "/" + path;  // as parse_job_spec resolves it
  std::vector<fs::path> files;
  std::error_code ec;
  if (source == "parallel") {
    // The split files of the pair and a named vocabulary: not the whole directory, where translation jobs cache
    // the joint vocabularies they learn (a new cache file is not new data).
    for (const char* split : {"train", "valid", "test"})
      for (const char* side : {"src", "tgt"})
        files.push_back(fs::path(path) / (std::string(split) + "." + data.value(side, "")));
    if (data.contains("vocab")) {
      const fs::path vocab = data["vocab"].get<std::string>();
      files.push_back(vocab.is_absolute() ? vocab : fs::path(path) / vocab);
    }
  } else if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.is_regular_file() && e.path().filename().string()[0] != '.') files.push_back(e.path());
  } else if (fs::is_regular_file(path, ec)) {  // never a FIFO or device: reading it would not end
    files.push_back(path);
  }
  std::sort(files.begin(), files.end());
  return files_identity(source, files);
}

namespace {

// Identity of an eval job's task files (a task file edited is a new job), relative paths the source tree's as the
// job spec resolves them.
std::string tasks_identity(const nlohmann::json& tasks, const std::string& repo_root) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& [name, task] : tasks.items())
    for (const char* key : {"path", "fewshot_path"})
      if (task.is_object() && task.contains(key) && task[key].is_string()) {
        const fs::path p = task[key].get<std::string>();
        const auto full = p.is_absolute() ? p : fs::path(repo_root) / p;
        if (fs::is_regular_file(full, ec)) files.push_back(full);
      }
  std::sort(files.begin(), files.end());
  return files_identity("tasks", files);
}

// A grid beyond this is a mistake (an axis written with far too many values), not an experiment to expand.
constexpr size_t kMaxCellsPerStage = 100'000;

// Identity of a source checkpoint: its file, or the files of an hf: directory (config.json, shards, index).
std::string source_identity(const std::string& source) {
  std::error_code ec;
  if (!is_hf_source(source))
    return fs::is_regular_file(source, ec) ? files_identity("checkpoint", {source}) : "missing";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(hf_dir(source), ec)) {
    const auto name = e.path().filename().string();
    if (e.is_regular_file() &&
        (name == "config.json" || name.ends_with(".safetensors") || name.ends_with(".index.json")))
      files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files.empty() ? "missing" : files_identity("hf-checkpoint", files);
}

void set_path(nlohmann::json& j, const std::string& dotted, const nlohmann::json& value) {
  nlohmann::json* at = &j;
  size_t start = 0;
  for (;;) {
    const auto dot = dotted.find('.', start);
    const std::string part = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (dot == std::string::npos) {
      (*at)[part] = value;
      return;
    }
    if (!(*at)[part].is_object()) (*at)[part] = nlohmann::json::object();
    at = &(*at)[part];
    start = dot + 1;
  }
}

bool matches(const CellRule& r, const std::string& stage, const nlohmann::json& coords) {
  if (!r.stage.empty() && r.stage != stage) return false;
  for (const auto& [axis, value] : r.match)
    if (!coords.contains(axis) || coords[axis] != value) return false;
  return true;
}

// The setting a job-spec error is about: the exact key, the mixer key behind a resolved layer, or a prefix.
const Setting* setting_for(const Settings& s, const std::string& field) {
  std::string key = field;
  if (key.rfind("model.layers[", 0) == 0) key = "model.mixer." + key.substr(key.find("].") + 2);
  for (;;) {
    if (auto it = s.find(key); it != s.end()) return &it->second;
    const auto dot = key.rfind('.');
    if (dot == std::string::npos) return nullptr;
    key = key.substr(0, dot);
  }
}

// A job key as the documentation names it: a resolved layer's key is the mixer key that set it.
std::string documented_key(const std::string& field) {
  if (field.rfind("model.layers[", 0) != 0) return field;
  return "model.mixer." + field.substr(field.find("].") + 2);
}

// One line of an error about a job's setting: file:line:column, the key as written, the message, the job it is in.
std::string spec_line(const ConfigError& e, const Settings& s, const Stage& stage, const nlohmann::json& coords) {
  const std::string message = std::string(e.what()).substr(e.field().empty() ? 0 : e.field().size() + 2);
  const auto* at = setting_for(s, e.field());
  const auto where = at ? at->pos.str() : stage.pos.str();
  const auto key = at ? at->written_as : "stage." + stage.name;
  return fmt::format("{}: {}: {} (job key {}, stage {}, cell {})", where, key, message, documented_key(e.field()),
                     stage.name, coords_label(coords));
}

[[noreturn]] void spec_failure(const ConfigError& e, const Settings& s, const Stage& stage,
                               const nlohmann::json& coords) {
  throw ExperimentError(spec_line(e, s, stage, coords));
}

// Every mixer key of the job that names something no table holds (a rule, a feature map, ...), each on its line,
// before the first of them would stop the rest from being read.
void check_mixer_names(const Settings& s, const Stage& stage, const nlohmann::json& coords) {
  std::vector<std::string> lines;
  for (const auto& [key, names] : mixer_name_keys()) {
    const auto it = s.find("model.mixer." + key);
    if (it == s.end() || !it->second.value.is_string()) continue;
    try {
      require_one_of(it->second.value.get<std::string>(), names, "model.mixer." + key);
    } catch (const ConfigError& e) {
      lines.push_back(spec_line(e, s, stage, coords));
    }
  }
  if (!lines.empty()) throw ExperimentError(fmt::format("{}", fmt::join(lines, "\nfwlab: ")));
}

// Attention transfer imitates the softmax layers of the model it starts from; the attention analysis compares with
// the nearest softmax-only model up its source chain (found by the worker the same way, through the job
// directories). "" when the job has its teacher; `source` is the model it starts from.
std::string missing_teacher(const PlannedJob& job, const nlohmann::json& source, const std::vector<PlannedJob>& jobs,
                            const std::map<std::string, size_t>& index_by_id) {
  const auto kind = job.spec.value("kind", std::string("train"));
  const auto from = model_config_from_json(source), target = model_config_from_json(job.model);
  if (kind == "transfer") {
    for (size_t i = 0; i < target.layers.size() && i < from.layers.size(); ++i)
      if (!(target.layers[i] == from.layers[i]) && from.layers[i].kind != "softmax")
        return fmt::format("kind 'transfer' imitates softmax layers, but layer {} of the model it starts from is {}", i,
                           from.layers[i].describe());
    return "";
  }
  const bool own_teacher =
      job.spec.contains("attention") && job.spec["attention"].is_object() && job.spec["attention"].contains("teacher");
  if (kind != "attention" || own_teacher || softmax_only(from)) return "";
  for (std::string id = job.depends_on; !id.empty();) {  // the job whose model is the source; then its own source
    const auto& j = jobs.at(index_by_id.at(id));
    if (!j.depends_on.empty()) {
      const auto& up = jobs.at(index_by_id.at(j.depends_on)).model;
      if (up.is_null() || softmax_only(model_config_from_json(up))) return "";
    } else if (j.spec.contains("init_checkpoint") && j.spec["init_checkpoint"].is_string()) {
      const auto up = checkpoint_model(j.spec["init_checkpoint"].get<std::string>());
      if (!up || softmax_only(model_config_from_json(*up))) return "";  // an unreadable one is reported elsewhere
    }
    id = j.depends_on;
  }
  return "kind 'attention' needs a softmax teacher, and no model up its source chain is softmax-only (set "
         "attention.teacher)";
}

using Cell = std::pair<nlohmann::json, const CellRule*>;  // coordinates, and the extra-cell rule that made it (or null)

// A stage's cells: the cartesian product of its axes, then the extra cells given for it.
std::vector<Cell> stage_cells(const Experiment& ex, const Stage& stage) {
  std::vector<Cell> cells = {{nlohmann::json::object(), nullptr}};
  size_t grid_cells = 1;
  for (const auto& name : stage.axes) {
    const auto& axis = *std::find_if(ex.axes.begin(), ex.axes.end(), [&](const Axis& a) { return a.name == name; });
    grid_cells *= axis.values.size();
    if (grid_cells > kMaxCellsPerStage)
      throw ExperimentError(fmt::format("{}: stage.{}: its axes make more than {} cells; split the experiment",
                                        stage.pos.str(), stage.name, kMaxCellsPerStage));
    std::vector<Cell> next;
    for (const auto& [c, r] : cells)
      for (const auto& v : axis.values) {
        auto coords = c;
        coords[name] = v;
        next.emplace_back(coords, nullptr);
      }
    cells = std::move(next);
  }
  for (const auto& extra : ex.extra_cells) {
    if (extra.stage != stage.name) continue;
    nlohmann::json coords = nlohmann::json::object();
    for (const auto& name : stage.axes) {
      if (!extra.match.count(name))
        throw ExperimentError(fmt::format("{}: cell: an extra cell of stage '{}' must give a value for axis '{}'",
                                          extra.pos.str(), stage.name, name));
      coords[name] = extra.match.at(name);
    }
    cells.emplace_back(coords, &extra);
  }
  return cells;
}

// A cell's settings: the defaults, the stage's, each coordinate's (a preset's keys, or the axis key), the extra
// cell's, then the job keys given with --set.
// [defaults.tasks] are the tasks of the file's eval stages (kind = "eval"): the training stages do not get them.
Settings cell_settings(const Experiment& ex, const Stage& stage, const nlohmann::json& coords, const CellRule* extra) {
  Settings all = ex.defaults;
  const auto kind = stage.settings.count("kind") ? stage.settings.at("kind").value
                    : all.count("kind")          ? all.at("kind").value
                                                 : nlohmann::json();
  if (kind != "eval")
    for (auto it = all.begin(); it != all.end();)
      it = it->first.rfind("tasks.", 0) == 0 ? all.erase(it) : std::next(it);
  for (const auto& [k, v] : stage.settings) all[k] = v;
  for (const auto& item : coords.items()) {
    const std::string& name = item.key();
    const auto& value = item.value();
    const auto& axis = *std::find_if(ex.axes.begin(), ex.axes.end(), [&](const Axis& a) { return a.name == name; });
    auto preset = ex.presets.find(name);
    if (value.is_string() && preset != ex.presets.end() && preset->second.count(value.get<std::string>())) {
      for (const auto& [k, v] : preset->second.at(value.get<std::string>())) all[k] = v;
    } else if (!axis.derived) {  // a derived setting's axis is read by its derivation (harness/derive.h)
      all[axis.key] = Setting{value, axis.pos, "grid." + name};
    }
  }
  if (extra)
    for (const auto& [k, v] : extra->settings) all[k] = v;
  for (const auto& [k, v] : ex.job_sets) all[k] = v;  // the command line's job keys hold over the whole file
  if (kind ==
      "eval")  // an eval stage scores the checkpoint as it is: the grid's model keys only match it to its parent
    for (auto it = all.begin(); it != all.end();)
      it = it->first.rfind("model.", 0) == 0 && !stage.settings.count(it->first) ? all.erase(it) : std::next(it);
  return all;
}

// The number of layers of a cell's model: its source's (the job it starts from), else its own setting, else the
// default configuration's.
int64_t layers_of(const std::optional<nlohmann::json>& source, const Settings& all) {
  if (source && source->is_object() && (*source).contains("n_layers")) return (*source)["n_layers"].get<int64_t>();
  if (const auto it = all.find("model.n_layers"); it != all.end() && it->second.value.is_number_integer())
    return it->second.value.get<int64_t>();
  return ModelConfig{}.n_layers;
}

// The grid as it is planned, stage after stage: the jobs so far and the indexes the later stages look them up by.
struct Planner {
  const Experiment& ex;
  const std::string& repo_root;
  const std::string& fwlab_version;
  std::vector<Derivation> derivations;
  const JobResults* results = nullptr;
  bool strict = true;  // a derived setting's failed input: DerivationError (else the cell waits)
  std::vector<PlannedJob> jobs;
  std::map<std::string, std::map<std::string, size_t>> by_stage;  // stage -> coords dump -> index in jobs
  std::map<std::string, std::string> data_ids;                    // data section dump -> its identity
  std::map<std::string, size_t> index_by_id;
  std::vector<std::string> waiting;
  std::map<std::string, std::set<std::string>> waiting_cells;  // stage -> coords dumps of its cells that wait

  // The coordinates of the cell of `stage.from` that a cell of `stage` starts from.
  nlohmann::json parent_coords(const Stage& stage, const nlohmann::json& coords) const {
    nlohmann::json parent = nlohmann::json::object();
    const auto& parent_stage =
        *std::find_if(ex.stages.begin(), ex.stages.end(), [&](const Stage& s) { return s.name == stage.from; });
    for (const auto& a : parent_stage.axes) parent[a] = coords[a];
    return parent;
  }

  // A cell that starts from a waiting cell (a stage after a derived one) waits with it.
  bool parent_waits(const Stage& stage, const nlohmann::json& coords) {
    if (stage.from.empty()) return false;
    const auto parent = parent_coords(stage, coords);
    if (!waiting_cells[stage.from].count(parent.dump())) return false;
    waiting.push_back(fmt::format("stage {}, cell {} waits for the {} cell it starts from ({})", stage.name,
                                  coords_label(coords), stage.from, coords_label(parent)));
    return true;
  }

  // The planned jobs of `stage` whose coordinates agree with `coords` on every axis both have, but `ignore`.
  std::vector<const PlannedJob*> matching(const std::string& stage, const nlohmann::json& coords,
                                          const std::set<std::string>& ignore) {
    std::vector<const PlannedJob*> out;
    for (const auto& [key, index] : by_stage[stage]) {
      const auto& j = jobs[index];
      bool same = j.applicable;
      for (const auto& [axis, value] : coords.items())
        same = same && (ignore.count(axis) || !j.coords.contains(axis) || j.coords[axis] == value);
      if (same) out.push_back(&j);
    }
    return out;
  }

  // The derivation's value for a cell; false (and a line in `waiting`) where its inputs have not all ended.
  bool apply_derivation(const Derivation& d, const Stage& stage, PlannedJob& job, Settings& all, int64_t n_layers) {
    const auto selector = d.selector.empty() ? job.coords[d.selector_axis].get<std::string>() : d.selector;
    const std::set<std::string> own = {d.selector_axis, d.count_axis};
    std::vector<DerivationInput> inputs;
    const auto& input_stage =
        find_named_row(selector_rows(), selector)->input == SelectorInput::probes ? d.probes : d.transfer;
    if (find_named_row(selector_rows(), selector)->input != SelectorInput::none)
      for (const auto* j : matching(input_stage, job.coords, own)) {
        auto path = "/" + d.probe_key;
        std::replace(path.begin(), path.end(), '.', '/');
        const auto ptr = nlohmann::json::json_pointer(path);
        inputs.push_back({j->id, j->spec.contains(ptr) ? j->spec.at(ptr) : nlohmann::json()});
      }
    const DerivationCell cell{d, selector, job.coords[d.count_axis].get<int64_t>(), n_layers,
                              fmt::format("stage {}, cell {}", stage.name, coords_label(job.coords))};
    Derived derived;
    try {
      derived = derive_layers(cell, inputs, results);
    } catch (const DerivationError& e) {
      if (strict) throw;
      derived.waiting = e.what();  // the tables show the cell as not run; the sweep stops on it
    }
    if (!derived.ready) {
      waiting.push_back(derived.waiting);
      return false;
    }
    all[d.key] = Setting{derived.value, d.pos, "derive." + d.name};
    job.derivation = derived.record;
    return true;
  }

  // The configuration `job` converts from (its parent job's, or its init_checkpoint's), with depends_on and
  // applicability taken from a parent job. nullopt with `unreadable` set where that source cannot be read.
  std::optional<nlohmann::json> source_model(const Stage& stage, PlannedJob& job, bool& unreadable) {
    unreadable = false;
    if (!stage.from.empty()) {
      const auto parent_coords = this->parent_coords(stage, job.coords);
      auto it = by_stage[stage.from].find(parent_coords.dump());
      if (it == by_stage[stage.from].end())
        throw ExperimentError(fmt::format("{}: stage.{}.from: no '{}' job for cell {} (excluded?)", stage.pos.str(),
                                          stage.name, stage.from, coords_label(parent_coords)));
      const auto& parent = jobs[it->second];
      if (!parent.applicable) job.applicable = false;
      job.depends_on = parent.id;
      unreadable = parent.model.is_null();  // the parent's resolved configuration (null: its source is unreadable)
      return parent.model;
    }
    if (job.spec.contains("init_checkpoint") && job.spec["init_checkpoint"].is_string()) {
      auto model = checkpoint_model(job.spec["init_checkpoint"].get<std::string>());
      unreadable = !model;  // check_job_inputs says why before anything runs
      return model;
    }
    return std::nullopt;
  }

  // Checks an applicable job's spec and resolves the model the worker will build: the source's configuration
  // overridden by this job's model keys. Errors name the setting at fault.
  void check_and_resolve(PlannedJob& job, const Stage& stage, const Settings& all,
                         const std::optional<nlohmann::json>& source, bool unreadable) {
    check_mixer_names(all, stage, job.coords);
    try {
      auto check = job.spec;
      if (!job.depends_on.empty()) check["init_checkpoint"] = "<from " + stage.from + ">";
      parse_job_spec(check, repo_root);
    } catch (const ConfigError& e) {
      spec_failure(e, all, stage, job.coords);
    }
    if (unreadable) return;
    try {
      const auto parent = source ? std::optional<ModelConfig>(model_config_from_json(*source)) : std::nullopt;
      const auto cfg = resolve_model_config(parent ? &*parent : nullptr,
                                            architecture_keys(job.spec.value("model", nlohmann::json::object())));
      if (parent) check_only_mixers_change(*parent, cfg);
      job.model = to_json(cfg);
      if (source)
        if (const auto missing = missing_teacher(job, *source, jobs, index_by_id); !missing.empty())
          spec_failure(ConfigError("kind", missing), all, stage, job.coords);
      job.params = count_parameters(cfg);
      job.state = state_size(cfg);
      job.context = cfg.context;
    } catch (const ConfigError& e) {
      spec_failure(e.field().rfind("model", 0) == 0 ? e : ConfigError("model." + e.field(), e.message()), all, stage,
                   job.coords);
    }
  }

  // Identity: the canonical (key-sorted) configuration without run-time settings, plus the parent job, the data
  // and the fwlab version.
  std::string identity(const PlannedJob& job) {
    auto canonical = job.spec;
    canonical.erase("threads");
    canonical.erase("device");
    canonical.erase("kernel_check");  // how a kernel is trusted, not what is computed
    const auto data = canonical.value("data", nlohmann::json::object());
    const auto data_key = data.dump();
    if (!data_ids.count(data_key)) data_ids[data_key] = data_identity(data, repo_root);
    canonical["fwlab_identity"] = {
        {"init_from_job", job.depends_on}, {"data", data_ids[data_key]}, {"version", fwlab_version}};
    if (canonical.contains("tasks"))
      canonical["fwlab_identity"]["tasks"] = tasks_identity(canonical["tasks"], repo_root);
    if (job.depends_on.empty() && job.spec.contains("init_checkpoint") && job.spec["init_checkpoint"].is_string()) {
      // A source checkpoint given by path: its content is part of the identity (a new file is a new job).
      canonical["fwlab_identity"]["init_checkpoint"] = source_identity(job.spec["init_checkpoint"].get<std::string>());
    }
    return sha256_hex(canonical.dump()).substr(0, 16);
  }

  void plan_cell(const Stage& stage, const nlohmann::json& coords, const CellRule* extra) {
    if (!extra && std::any_of(ex.exclude.begin(), ex.exclude.end(),
                              [&](const CellRule& r) { return matches(r, stage.name, coords); }))
      return;
    PlannedJob job;
    job.stage = stage.name;
    job.coords = coords;
    job.timeout_s = stage.timeout_s;
    job.applicable = !std::any_of(ex.not_applicable.begin(), ex.not_applicable.end(),
                                  [&](const CellRule& r) { return matches(r, stage.name, coords); });
    if (parent_waits(stage, coords)) {
      waiting_cells[stage.name].insert(coords.dump());
      return;
    }
    Settings all = cell_settings(ex, stage, coords, extra);
    job.spec = nlohmann::json::object();
    for (const auto& [k, s] : all) set_path(job.spec, k, s.value);
    bool unreadable = false;
    auto source = source_model(stage, job, unreadable);
    for (const auto& d : derivations)
      if (d.stage == stage.name && job.applicable) {
        if (!apply_derivation(d, stage, job, all, layers_of(source, all))) {  // planned once its inputs end
          waiting_cells[stage.name].insert(coords.dump());
          return;
        }
        set_path(job.spec, d.key, all[d.key].value);
      }
    if (job.applicable) check_and_resolve(job, stage, all, source, unreadable);
    job.id = identity(job);
    job.settings = std::move(all);
    by_stage[stage.name][coords.dump()] = jobs.size();
    index_by_id[job.id] = jobs.size();
    jobs.push_back(std::move(job));
  }
};

}  // namespace

Plan plan_experiment(const Experiment& ex, const std::string& repo_root, const std::string& fwlab_version,
                     const JobResults* results, bool strict) {
  Planner planner{ex, repo_root, fwlab_version, read_derivations(ex), results, strict, {}, {}, {}, {}, {}, {}};
  for (const auto& stage : ex.stages)
    for (const auto& cell : stage_cells(ex, stage)) planner.plan_cell(stage, cell.first, cell.second);
  return {std::move(planner.jobs), std::move(planner.waiting)};
}

std::vector<PlannedJob> plan_jobs(const Experiment& ex, const std::string& repo_root,
                                  const std::string& fwlab_version) {
  return plan_experiment(ex, repo_root, fwlab_version, nullptr).jobs;
}

std::vector<std::string> check_job_inputs(const Experiment& ex, const std::vector<PlannedJob>& jobs,
                                          const std::string& repo_root) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& job : jobs) {
    if (!job.applicable) continue;
    const bool own_source = job.depends_on.empty();  // a parent stage's checkpoint does not exist yet
    JobSpec spec;
    try {
      auto check = job.spec;
      if (!own_source) check["init_checkpoint"] = "<from the parent stage>";
      spec = parse_job_spec(check, repo_root);
    } catch (const ConfigError&) {
      continue;  // plan_jobs reported it
    }
    const int64_t vocab = job.model.is_object() ? job.model.value("vocab", int64_t{0}) : 0;
    auto problems = input_problems(spec, own_source, vocab);
    for (auto& p : tokenizer_problems(spec)) problems.push_back(std::move(p));
    if (job.model.is_object() && job.model.contains("context") && job.model["context"].is_number_integer())
      for (auto& p : task_context_problems(spec, job.model["context"].get<int64_t>())) problems.push_back(std::move(p));
    for (const auto& problem : problems) {
      const auto* at = setting_for(job.settings, problem.field());
      const auto stage =
          std::find_if(ex.stages.begin(), ex.stages.end(), [&](const Stage& s) { return s.name == job.stage; });
      const auto where = at ? at->pos.str() : stage != ex.stages.end() ? stage->pos.str() : ex.file + ":1:1";
      const auto key = at ? at->written_as : fmt::format("{} (default)", problem.field());
      const std::string message = std::string(problem.what()).substr(problem.field().size() + 2);
      auto line = fmt::format("{}: {}: {}", where, key, message);
      if (seen.insert(line).second)
        out.push_back(fmt::format("{} (job key {}, stage {}, cell {})", line, problem.field(), job.stage,
                                  coords_label(job.coords)));
    }
  }
  return out;
}

}  // namespace fwlab

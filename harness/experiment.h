// Experiment files (experiments/*.toml): defaults, stages, a grid of axes, presets, rules, profiles; expanded
// into jobs. The format is documented in harness/README.md. Torch-free.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "contract/job/did_you_mean.h"

namespace fwlab {

// A problem in an experiment file: names file:line:column and the key. Exit code 2.
class ExperimentError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SourcePos {
  std::string file;
  int64_t line = 0, column = 0;
  std::string label;        // where a value came from outside the file ("--set KEY=VALUE")
  std::string str() const;  // "file:line:column", or the label
};

// One value set on a job key, with where it came from.
struct Setting {
  nlohmann::json value;
  SourcePos pos;
  std::string written_as;  // the key as the file wrote it (e.g. "rule" for model.mixer.rule)
};
using Settings = std::map<std::string, Setting>;  // job key path (dotted) -> setting

struct Stage {
  std::string name;
  std::string from;               // stage whose job this one starts from ("" = from scratch)
  std::vector<std::string> axes;  // grid axes that vary this stage
  bool axes_given = false;
  Settings settings;
  double timeout_s = 0;  // per-job timeout (0: none)
  SourcePos pos, from_pos;
  std::vector<std::string> after;  // stages whose results a derived setting of this one reads ([derive.NAME])
};

struct Axis {
  std::string name;
  std::vector<nlohmann::json> values;
  std::string key;  // job key set by scalar values ("" when every value is a preset)
  SourcePos pos;
  bool derived = false;  // read by a [derive.NAME] section (its selector or count): its values set no job key
};

struct CellRule {  // not_applicable / exclude / cell entries: axis values (+ settings for extra cells)
  std::map<std::string, nlohmann::json> match;
  std::string stage;
  Settings settings;
  SourcePos pos;
};

// [executor]: where the jobs run (harness/README.md). Local by default; Slurm takes the cluster's settings.
struct ExecutorSpec {
  std::string kind = "local";                            // local | slurm
  std::string partition, time, mem, gres, account, qos;  // "" = the cluster's default
  int64_t cpus = 0;                                      // per job (0: --threads, or 1)
  int64_t gpus = 0;                                      // per job (--gpus-per-task)
  int64_t array_limit = 0;                               // array tasks running at once (0: no limit)
  int64_t signal_before = 120;     // seconds before the time limit: the worker checkpoints and the job is requeued
  std::vector<std::string> extra;  // further sbatch arguments, passed as given (no shell)
  std::map<std::string, SourcePos> pos;  // where each key was written
};

struct Experiment {
  std::string name, description, file;
  // [experiment] seeds = N: every cell of the stages that vary with the grid runs N times, seeds defaults.seed,
  // +1, ... (an axis "seed" added to the grid and to those stages; stages with axes = [] stay one shared run, as
  // a teacher that conversions start from). Tables then show mean ± sd over them.
  int64_t seeds = 1;
  Settings defaults;
  std::vector<Stage> stages;  // in dependency order (a stage after the one it starts from)
  std::vector<Axis> axes;
  std::map<std::string, std::map<std::string, Settings>> presets;  // axis -> value name -> settings
  std::vector<CellRule> not_applicable, exclude, extra_cells;
  std::vector<std::string> profiles;
  std::vector<std::string> sets;  // the --set overrides applied, as given
  // `--set JOB_KEY=VALUE` (optim.lr=3e-4, lr=3e-4): the job key in every cell of every stage, over whatever the
  // file sets (Hydra's override), keyed by the job key path.
  Settings job_sets;
  // Each axis's values as the file wrote them, before the profile and --set: a rule or a published row about a
  // value a subset left out is set aside, not an error.
  std::map<std::string, std::vector<nlohmann::json>> written_axes;
  ExecutorSpec executor;
  // [table], [[plot]], [published] and [derive] (for the analysis commands and harness/derive.h, which check them),
  // with the position of every key
  // ("table.rows", "plot[0].kind", "table.rows[1]") so their errors can name file:line:column.
  nlohmann::json table = nlohmann::json::object();
  nlohmann::json plots = nlohmann::json::array();
  nlohmann::json published = nlohmann::json::object();  // the paper's own table, for `fwlab table --compare`
  nlohmann::json derive = nlohmann::json::object();     // [derive.NAME]: settings derived from results (derive.h)
  nlohmann::json tables = nlohmann::json::object();     // [tables.NAME]: further tables, with [table]'s keys
  std::map<std::string, SourcePos> analysis_pos;
};

// Parses `path` with profile `profile` ("" for none) applied, then the command line's `--set KEY=VALUE`
// overrides: KEY is a dotted path into the file as a profile writes it (defaults.data.path,
// stage.pretrain.init_checkpoint, ...), or a job key (optim.lr, or a short name such as lr) that then holds in
// every job; VALUE a TOML value (a bare word is a string). Errors about a --set value name it instead of a line.
// Throws ExperimentError.
Experiment load_experiment(const std::string& path, const std::string& profile,
                           const std::vector<std::string>& sets = {});

// The job keys an experiment file may set with a short name (rule -> model.mixer.rule, ...).
const std::map<std::string, std::string>& key_aliases();

}  // namespace fwlab

// Expansion of an experiment into jobs: grid cells per stage, presets, rules, dependencies, identities.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/derive.h"
#include "harness/experiment.h"
#include "contract/job/file_identity.h"
#include "contract/model/model_config.h"
#include "contract/version.h"

namespace fwlab {

struct PlannedJob {
  std::string stage;
  nlohmann::json coords = nlohmann::json::object();  // axis -> value, the stage's axes only
  bool applicable = true;                            // false: N/A, never run
  nlohmann::json spec;                               // job.json, without init_checkpoint
  std::string depends_on;                            // id of the job this one starts from ("" none)
  std::string id;                                    // identity: hash of the canonical config
  double timeout_s = 0;
  nlohmann::json model;  // the resolved model configuration (null: N/A, or its source checkpoint is unreadable)
  int64_t params = 0;
  StateSize state;
  int64_t context = 0;
  Settings settings;          // every setting of the job, with where the file set it (for error messages)
  nlohmann::json derivation;  // a setting derived from results ([derive.NAME]): how (harness/derive.h); else null
};

// Every job of the experiment, stages in dependency order, and the cells not planned yet: those whose derived
// setting ([derive.NAME], harness/derive.h) reads jobs that have not ended (`waiting` says which, a line a cell).
struct Plan {
  std::vector<PlannedJob> jobs;
  std::vector<std::string> waiting;
};

// Validation errors (ExperimentError) name the file:line:column of the setting at fault. `repo_root` resolves
// default data paths; `fwlab_version` enters every identity. `results` answers for the jobs a derived setting
// reads (null: none has ended). Throws DerivationError where such a job ended without a result (`strict`; else
// the cell waits, with the reason).
Plan plan_experiment(const Experiment& ex, const std::string& repo_root, const std::string& fwlab_version,
                     const JobResults* results, bool strict = true);
// plan_experiment's jobs, with no results known.
std::vector<PlannedJob> plan_jobs(const Experiment& ex, const std::string& repo_root, const std::string& fwlab_version);

// Checks the files every applicable job will read (corpus, tokenizer files, a source checkpoint) without running
// anything. Returns one message per problem, naming file:line:column and the experiment key that set the path
// (identical problems of several jobs once).
std::vector<std::string> check_job_inputs(const Experiment& ex, const std::vector<PlannedJob>& jobs,
                                          const std::string& repo_root);

// Identity of a job's data: a content hash of the files it reads (size/mtime for very large files).
std::string data_identity(const nlohmann::json& data_spec, const std::string& repo_root);

// Human-readable cell label: "rule=add variant=baseline".
std::string coords_label(const nlohmann::json& coords);

}  // namespace fwlab

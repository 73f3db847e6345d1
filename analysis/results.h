// What the results database knows about the jobs of one experiment file (at one profile): the planned grid
// joined with the jobs' rows, evaluations, divergences and metric series. Read-only; torch-free.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "contract/job/job_status.h"
#include "harness/db.h"
#include "harness/experiment.h"
#include "harness/plan.h"

namespace fwlab {

struct EvalRow {
  std::string split, checkpoint;
  int64_t step = 0;
  std::optional<double> loss, ppl, bpc, accuracy;

  // One of loss | ppl | bpc | accuracy by name.
  const std::optional<double>& field(const std::string& name) const {
    return name == "loss" ? loss : name == "ppl" ? ppl : name == "bpc" ? bpc : accuracy;
  }
};

// Text for a Markdown table cell: pipes escaped, line breaks flattened (a worker's reason may hold both).
std::string md_escape(const std::string& s);

struct DivergenceRow {
  int64_t step = 0;
  std::string cause, value, first_nonfinite_layer, state_layer;
  std::optional<double> last_finite_loss, lr;
};

struct JobRecord {
  PlannedJob planned;               // stage, coords, spec (job.json without init_checkpoint), id, applicable, ...
  std::optional<JobStatus> status;  // the database's; none when it has no row (not run yet, or n/a: not applicable)
  std::string cause, reason;
  std::vector<EvalRow> evals;  // by split, step
  std::optional<DivergenceRow> divergence;
  // Its `kernel_fallback` events (contract/job/events.h: a custom kernel failed its first-use check), as recorded.
  std::vector<nlohmann::json> kernel_fallbacks;

  const std::string& id() const { return planned.id; }
  const std::string& stage() const { return planned.stage; }
  std::string status_text() const;  // the status's name, else "not run" or "n/a"
  bool finished() const { return status == JobStatus::finished; }
  bool diverged() const { return status == JobStatus::diverged; }
  bool failed() const;  // failed, crashed, timeout, blocked: ended without a result
  bool active() const { return status == JobStatus::running; }
};

class ResultSet {
 public:
  // Plans `ex` (grid order) and reads what `db` holds for each job. `db` must outlive the set.
  // `planned_with`: what the cells with derived settings read (harness/derive.h); by default the database.
  ResultSet(const Experiment& ex, const std::string& profile, Db& db, const std::string& repo_root,
            const std::string& version, const JobResults* planned_with = nullptr);
  // Every applicable job counted as finished (without results): what `fwlab plot --list` draws.
  void assume_all_finished();

  const Experiment& experiment() const { return ex_; }
  const std::string& profile() const { return profile_; }
  const std::vector<JobRecord>& jobs() const { return jobs_; }
  // Metric series of a job (`metric` events): step -> value (NaN where the worker recorded a non-finite value).
  const std::map<int64_t, double>& series(const std::string& job_id, const std::string& key) const;

 private:
  Experiment ex_;
  std::string profile_;
  Db& db_;
  std::vector<JobRecord> jobs_;
  mutable std::map<std::pair<std::string, std::string>, std::map<int64_t, double>> series_;
};

// A job setting by short name or dotted path (axis name, alias such as "rule" or "m", or "model.mixer.m"),
// looked up in the job's coordinates first, then in its job.json (where a converted job holds only the model keys
// it overrides); null when absent. "stage" is the job's stage.
nlohmann::json job_value(const JobRecord& job, const std::string& name);

// The value as a short display string: strings as they are, numbers in their shortest form.
std::string value_text(const nlohmann::json& v);

}  // namespace fwlab

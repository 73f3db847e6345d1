// What a sweep prints when no terminal watches it (nohup, Slurm, CI): a line when a job starts, a line when it
// ends (status, key metric, time), and a summary at most every 30 s. Lines go to stdout and are flushed at once,
// so a log file shows them as they happen; on a terminal the progress bar is drawn instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "harness/plan.h"
#include "harness/store.h"

namespace fwlab {

// "valid ppl 123.45 (best, step 400)": the job's best validation result, or "" when it has none.
std::string key_metric(Db& db, const std::string& job_id);

// "nonfinite_loss at step 7 (value nan; last finite loss 2.5; lr 0.01; first non-finite output: blocks.0)", or
// "" when the job has no divergence recorded.
std::string divergence_text(Db& db, const std::string& job_id);

// The step the job's last attempt resumed from (its start event's resumed_from_step); none where it started afresh.
std::optional<int64_t> resumed_from_step(Db& db, const std::string& job_id);

void log_job_started(const PlannedJob& j);
void log_job_ended(Db& db, const PlannedJob& j, const std::string& status);

// The summary line: `ended` of `total`, `running`, `unsuccessful`; the ETA from the pace so far.
class SweepTicker {
 public:
  explicit SweepTicker(double every_s = 30.0);
  void tick(size_t ended, size_t total, int running, int unsuccessful, bool force = false);

 private:
  double every_s_, start_, last_;
  size_t ended_at_start_ = static_cast<size_t>(-1);
};

}  // namespace fwlab

// Local executor: a pool of fwlab-worker processes (Boost.Process) over the planned jobs, respecting
// dependencies, timeouts and a retry budget, recording everything in the results database as it happens.
#pragma once

#include <string>
#include <vector>

#include "harness/db.h"
#include "harness/plan.h"

namespace fwlab {

struct ExecOptions {
  std::string worker;         // fwlab-worker executable
  std::string runs_dir;       // job directories: runs_dir/<job id>
  std::string experiment, profile;
  int jobs = 1;               // concurrent workers
  int threads_per_job = 1;
  double timeout_s = 0;       // per job, unless the stage sets one (0: none)
  int retries = 1;            // extra attempts after a crash or timeout within one sweep
  bool retry_failed = false;  // re-run jobs that failed (bad spec/data) before
  bool retry_diverged = false;
  bool progress = false;      // draw a progress bar (terminal)
};

// Job states in the database. Terminal: finished, diverged, failed, crashed, timeout, blocked; resumable on the
// next sweep: interrupted, crashed, timeout (infrastructure).
struct SweepSummary {
  int finished = 0, diverged = 0, failed = 0, crashed = 0, timeout = 0, blocked = 0, skipped = 0, interrupted = 0, na = 0;
  bool interrupted_by_signal = false;
};

// Records the experiment's cells and jobs, then runs what needs running. Returns when every job has ended or
// the sweep was interrupted (SIGINT/SIGTERM: running workers are terminated and marked interrupted).
SweepSummary run_sweep(Db& db, int64_t sweep_id, const std::vector<PlannedJob>& jobs, const ExecOptions& opt);

// Registers cells and job rows (status pending for new jobs) without running anything.
void register_jobs(Db& db, int64_t sweep_id, const std::vector<PlannedJob>& jobs, const ExecOptions& opt);

void install_signal_handlers();

// Sweeps and jobs marked running whose orchestrator (on this host) is gone, e.g. after kill -9: marked
// interrupted, so that status tells the truth and the next sweep resumes them. Returns how many were marked.
int64_t mark_orphans_interrupted(Db& db);

}  // namespace fwlab

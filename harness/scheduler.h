// The scheduler: what may run now (dependencies, results that stand, jobs another orchestrator holds), what an
// ending means (the job's status file first, then its launcher's view), and the retry policy. It moves job rows
// only through the Store and starts jobs only through a Launcher, so the local pool and Slurm share all of it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "contract/job/events.h"
#include "harness/launcher.h"
#include "harness/plan.h"
#include "harness/store.h"

namespace fwlab {

struct SweepOptions {
  std::string runs_dir;  // job directories: runs_dir/<job id>
  int threads_per_job = 1;
  int retries = 1;  // extra attempts after an infrastructure failure (crash, timeout, preemption, node failure)
  bool retry_failed = false;  // re-run jobs that failed (bad spec/data) or were cancelled before
  bool retry_diverged = false;
  bool progress = false;    // draw a progress bar (terminal)
  bool lines = false;       // no terminal: a line per job start and end (harness/sweep_log.h)
  bool continuing = false;  // sync: the sweep's jobs as they stand; nothing that ended is taken up again
  std::string round_lock;   // a file locked for each round (cluster launchers): two fwlab processes take turns
};

struct SweepSummary {
  int finished = 0, diverged = 0, failed = 0, crashed = 0, timeout = 0, blocked = 0, cancelled = 0, skipped = 0,
      interrupted = 0, na = 0, in_flight = 0;
  int resumed = 0;  // of those that ended with a result: resumed from an earlier attempt's step
  int adopted = 0;  // results taken from records already in their directories (harness/adopt.h), not run
  bool interrupted_by_signal = false;
  int unsuccessful() const { return failed + crashed + timeout + blocked + cancelled; }
};

// What an ending means: the status recorded, and whether an infrastructure retry may follow.
struct Verdict {
  Outcome outcome;
  bool retryable = false;
};
// `status_file`: the job's own record (nullopt: none); `dir_seen`: the job left any trace in its directory.
Verdict judge(const Ended& e, const std::optional<StatusFile>& status_file, bool stopping, bool dir_seen);

class Scheduler {
 public:
  Scheduler(Store& store, Launcher& launcher, int64_t sweep_id, std::vector<PlannedJob> jobs, SweepOptions opt);
  // One round: records the jobs that ended, ingests the records that grew, starts what is ready. Returns false
  // when none of its jobs is queued or in flight.
  bool round();
  // SIGINT / SIGTERM: nothing more starts; the launcher stops what it runs (a cluster's jobs go on).
  void stop(bool now);
  const SweepSummary& summary() const { return summary_; }
  size_t total() const { return total_; }
  size_t ended() const { return ended_; }
  size_t queued() const { return queue_.size(); }
  bool detachable() const { return launcher_.detachable(); }

 private:
  void take_jobs();
  void record(const Ended& e);
  void start_ready();
  void report(const PlannedJob& j, const std::string& what);
  void ended(const PlannedJob& j, JobStatus status);

  Store& store_;
  Launcher& launcher_;
  int64_t sweep_id_;
  std::vector<PlannedJob> jobs_;
  SweepOptions opt_;
  std::map<std::string, const PlannedJob*> by_id_;  // this sweep's applicable jobs
  std::deque<const PlannedJob*> queue_;             // to start (in order), after their dependencies
  std::set<std::string> mine_;                      // jobs this scheduler is responsible for
  std::set<std::string> done_;                      // ... that ended while it ran
  SweepSummary summary_;
  size_t total_ = 0, ended_ = 0;
  bool stopping_ = false;
  int64_t pid_;
  std::string host_;
};

struct DriveOptions {
  bool progress = false;  // the terminal's bar
  bool detach = false;    // return once everything that can be submitted is (a cluster)
  bool lines = false;     // no terminal: a summary line at most every 30 s
};
void install_signal_handlers();
// Rounds until every job has ended (or, detached, until nothing more can be submitted now), drawing progress.
SweepSummary drive(Scheduler& s, const DriveOptions& d);

// The job.json a job runs with: its spec, the threads, and the checkpoint of the job it starts from.
nlohmann::json job_file(const PlannedJob& j, const SweepOptions& opt);

}  // namespace fwlab

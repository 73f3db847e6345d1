// The job state machine in the results database: registering a sweep's jobs, reading and moving a job's state,
// claiming it for one runner, and recovering what a killed orchestrator left behind. The scheduler and the
// launchers change job rows only through here.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "contract/job/job_status.h"
#include "harness/db.h"
#include "harness/plan.h"

namespace fwlab {

struct JobRow {
  std::string id;
  JobStatus status = JobStatus::pending;
  int64_t owner_pid = 0;  // local: the orchestrator running it
  std::string owner_host, launcher, batch_id, submit_token, dir;
  int64_t attempts = 0, retries_used = 0;
};

// Why a job ended as it did: the status, and what the database records with it.
struct Outcome {
  JobStatus status;
  nlohmann::json cause, reason, exit_code;  // null when unknown
};

// A sweep's row as `fwlab sweep` records it: what ran it, where and how (executor and options as JSON).
struct SweepRecord {
  std::string experiment, file, profile, command, host;
  int64_t pid = 0;
  nlohmann::json executor, options;
};

// A cluster sweep still open: what `fwlab sync` needs to continue it (as the sweep recorded them).
struct OpenSweep {
  int64_t id;
  std::string experiment;
  nlohmann::json executor, options;
};

class Store {
 public:
  explicit Store(Db& db) : db_(db) {}
  Db& db() { return db_; }

  // Records a sweep's cells and jobs (status pending for new jobs) and links them to the sweep.
  void register_jobs(int64_t sweep_id, const std::vector<PlannedJob>& jobs, const std::string& experiment,
                     const std::string& profile, const std::string& runs_dir);
  std::optional<JobRow> job(const std::string& id);
  // Every job row of a sweep, and the PlannedJob each one was registered from (for sync: no experiment file).
  std::vector<PlannedJob> sweep_jobs(int64_t sweep_id);

  // Moves a job to an end state (or back to pending) and ends its ownership.
  void set_outcome(const std::string& id, const Outcome& o);
  // A result adopted from the record in its directory (harness/adopt.h): the outcome, with the record's own start
  // and end times, as one attempt.
  void set_adopted(const std::string& id, const Outcome& o, double started, double finished);
  // pending again for a retry after an infrastructure failure (counts one retry).
  void retry(const std::string& id, const Outcome& why);
  // A result that is run again (--retry-failed/--retry-diverged) starts over: its directory is kept beside the
  // new one and its ingested record is forgotten.
  void start_over(const std::string& id, const std::string& runs_dir);

  // Claims a job for this orchestrator before its launcher starts it; false when it has a result meanwhile, a
  // live orchestrator on this host runs it, or it is submitted to another launcher. The local pool's claim marks
  // it running at once.
  bool claim(const std::string& id, const std::string& launcher, int64_t pid, const std::string& host);
  void mark_started_local(const std::string& id, int64_t pid, const std::string& host);
  // Marks a wave's jobs submitted under `token` before the batch system sees them (the intent), and records the
  // batch ids once it answered. Both in one transaction each.
  void mark_submitted(const std::vector<std::string>& ids, const std::string& token, int64_t sweep_id,
                      const std::string& launcher, const std::string& script);
  void record_batch_ids(const std::string& token, const std::string& array_id,
                        const std::vector<std::string>& batch_ids);
  void mark_running(const std::string& id);
  // Jobs submitted to `launcher` and not ended: their batch ids (empty while the wave's answer is unrecorded).
  std::vector<JobRow> in_flight(const std::string& launcher);
  // Waves whose batch id was never recorded (fwlab died between the intent and the answer).
  std::vector<std::string> unanswered_waves(const std::string& launcher);
  void forget_wave(const std::string& token);

  // Sweeps and jobs marked running whose local orchestrator (on this host) is gone: interrupted.
  int64_t mark_orphans_interrupted();

  // The sweep rows. open_sweep records a running sweep and returns its id; close_sweep ends it.
  int64_t open_sweep(const SweepRecord& sweep);
  void close_sweep(int64_t sweep_id, SweepStatus status);
  // Whether any job of the sweep ended without a result (failed, crashed, timed out, blocked, cancelled, interrupted).
  bool sweep_has_unsuccessful_jobs(int64_t sweep_id);
  // Cluster sweeps still running, oldest first.
  std::vector<OpenSweep> open_cluster_sweeps();

 private:
  Db& db_;
};

std::string host_name();
bool pid_alive(int64_t pid);

}  // namespace fwlab

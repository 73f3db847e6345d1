// The states a job goes through and the worker's exit codes: what the worker, the harness and analysis agree
// on. The database stores the names (to_string); the schema is in harness/README.md.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace fwlab {

enum class JobStatus {
  pending,    // registered, not started (or waiting for a retry)
  submitted,  // handed to a batch system (Slurm), not known to run yet
  running,
  finished,     // a result
  diverged,     // a result: the record says where and why
  failed,       // bad spec or data: running it again gives the same answer
  crashed,      // an unexpected error, a signal, or (Slurm) a node ran out of memory
  timeout,      // no result within the job's time
  blocked,      // the job it starts from did not finish
  interrupted,  // stopped by a signal or requeued; resumes from its checkpoint
  cancelled,    // cancelled by a person (scancel): final, not retried
};

std::string_view to_string(JobStatus s);
std::optional<JobStatus> parse_job_status(std::string_view name);
// "'pending', 'running'" for SQL IN lists.
std::string sql_list(std::initializer_list<JobStatus> statuses);

// A result stands: finished or diverged.
inline bool is_result(JobStatus s) { return s == JobStatus::finished || s == JobStatus::diverged; }
// Someone is working on it: submitted or running.
inline bool is_active(JobStatus s) { return s == JobStatus::submitted || s == JobStatus::running; }
// Ended without a result, not to be run again unless asked (--retry-failed): failed, cancelled, blocked.
inline bool is_final_failure(JobStatus s) { return s == JobStatus::failed || s == JobStatus::cancelled; }

// The states of a sweep (one `fwlab sweep` and, on a cluster, the syncs that continue it): running until none of
// its jobs is queued or in flight, then finished (every job has a result) or failed (some ended without one);
// interrupted when a signal stopped it, or its orchestrator was found dead.
enum class SweepStatus { running, finished, failed, interrupted };
std::string_view to_string(SweepStatus s);

// Exit codes of fwlab-worker (documented in worker/README.md).
enum WorkerExit : int {
  kExitFinished = 0,
  kExitCrashed = 1,
  kExitBadSpec = 2,
  kExitDiverged = 3,
  kExitInterrupted = 4
};

// The status a worker's exit code stands for (crashed for codes it never uses).
JobStatus status_of_exit(int code);

}  // namespace fwlab

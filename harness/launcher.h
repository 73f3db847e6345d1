// Launchers start jobs somewhere (a local process pool, a Slurm cluster) and say when each has ended; the
// scheduler decides what runs and what an ending means. One interface, so every guarantee of the scheduler
// (retries, dependencies, never twice) holds for every launcher.
#pragma once

#include <csignal>
#include <cstddef>
#include <cstdlib>
#include <string_view>
#include <string>
#include <vector>

#include "harness/plan.h"
#include "harness/store.h"

namespace fwlab {

// How a job ended, as its launcher saw it. The job's own status file says the rest.
struct Ended {
  std::string job_id;
  enum class How {
    exited,         // the worker exited with `code` (local)
    signaled,       // the worker was killed by signal `code` (local)
    timed_out,      // the scheduler's own time limit (local)
    launch_failed,  // it could not be started: `detail` says why
    batch,          // the batch system's final state `state` (Slurm: COMPLETED, TIMEOUT, ...; "" forgotten)
    not_submitted,  // recorded as submitted, but the submission never reached the batch system: start it again
  } how = How::exited;
  int code = -1;
  std::string state, detail;
};

// One job to start: the job, its directory (job.json written), and the sweep that starts it.
struct Launch {
  const PlannedJob* job;
  std::string dir;
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  virtual std::string name() const = 0;  // "local" | "slurm": the jobs.launcher column
  // How many more jobs may start now.
  virtual size_t free_slots() const = 0;
  // Starts a wave of ready jobs, recording each in the store as it goes out (running, or submitted).
  virtual void start(const std::vector<Launch>& wave, Store& store, int64_t sweep_id) = 0;
  // The jobs that ended since the last call.
  virtual std::vector<Ended> collect(Store& store) = 0;
  // The jobs it is running or has submitted (their ids), for ingesting their records as they grow.
  virtual std::vector<std::string> in_flight(Store& store) = 0;
  // SIGINT / SIGTERM of the sweep: a local pool stops its workers (`now`: at once); jobs on a cluster go on.
  virtual void stop(bool now) = 0;
  // Whether jobs outlive the orchestrator (a cluster): the sweep may then return before they end (--detach).
  virtual bool detachable() const = 0;
};

// Test hook: FWLAB_CRASH_AT=<point> kills fwlab with SIGKILL at that point (the never-twice tests).
inline void crash_point(const char* point) {
  const char* at = std::getenv("FWLAB_CRASH_AT");
  if (at && std::string_view(at) == point) std::raise(SIGKILL);
}

}  // namespace fwlab

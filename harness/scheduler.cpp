#include "harness/scheduler.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <deque>
#include <thread>
#include <filesystem>
#include <fstream>

#include "contract/job/events.h"
#include "harness/adopt.h"
#include "harness/ingest.h"
#include "harness/sweep_log.h"

namespace fwlab {

namespace fs = std::filesystem;

namespace {

std::string log_tail(const fs::path& path, size_t lines) {
  std::ifstream in(path);
  std::deque<std::string> tail;
  std::string line;
  while (std::getline(in, line)) {
    tail.push_back(line);
    if (tail.size() > lines) tail.pop_front();
  }
  std::string out;
  for (const auto& l : tail) out += "    | " + l + "\n";
  return out;
}

std::atomic<int> g_signals{0};
void on_signal(int) { g_signals.fetch_add(1); }

nlohmann::json text_or_null(const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Slurm's final states (NOTES.md): infrastructure failures are retried, the rest are final.
Verdict judge_batch_state(const std::string& state, const std::optional<StatusFile>& sf, bool dir_seen) {
  const nlohmann::json cause = lower(state);
  if (state == "OUT_OF_MEMORY")
    return {{JobStatus::crashed, cause, "the job ran out of memory (Slurm OUT_OF_MEMORY)", nullptr}, false};
  if (state == "CANCELLED") return {{JobStatus::cancelled, cause, "cancelled (scancel)", nullptr}, false};
  if (state == "TIMEOUT" || state == "DEADLINE")
    return {{JobStatus::timeout, cause, fmt::format("Slurm {}: the job's time limit ended it", state), nullptr}, true};
  if (state == "PREEMPTED") return {{JobStatus::interrupted, cause, "preempted", nullptr}, true};
  if (state == "NODE_FAIL" || state == "BOOT_FAIL")
    return {{JobStatus::crashed, cause, fmt::format("Slurm {}", state), nullptr}, true};
  // COMPLETED, FAILED, or forgotten by the batch system: the worker's own record says what happened.
  if (!dir_seen)
    return {{JobStatus::crashed, "job_dir_unseen",
             "the job ended without writing to its directory: the nodes cannot see it (the runs folder must be on a "
             "filesystem shared with the nodes; see harness/README.md)",
             nullptr},
            false};
  if (sf && sf->status == JobStatus::interrupted)
    return {{JobStatus::interrupted, "interrupted", "stopped by a signal and not requeued", nullptr}, true};
  if (sf && sf->status == JobStatus::crashed)
    return {{JobStatus::crashed, text_or_null(sf->cause), text_or_null(sf->reason),
             sf->exit_code ? nlohmann::json(*sf->exit_code) : nullptr},
            true};
  return {
      {JobStatus::crashed, "lost",
       fmt::format("the batch job ended ({}) without the worker recording an end", state.empty() ? "forgotten" : state),
       nullptr},
      true};
}

}  // namespace

Verdict judge(const Ended& e, const std::optional<StatusFile>& sf, bool stopping, bool dir_seen) {
  using How = Ended::How;
  if (e.how == How::launch_failed) return {{JobStatus::crashed, "launch", e.detail, nullptr}, false};
  if (e.how == How::timed_out) return {{JobStatus::timeout, "timeout", e.detail, nullptr}, true};
  // A result (or a bad spec) the worker recorded stands, whatever the launcher saw afterwards.
  if (sf && (is_result(sf->status) || sf->status == JobStatus::failed)) {
    const nlohmann::json code = sf->exit_code ? nlohmann::json(*sf->exit_code) : nlohmann::json(nullptr);
    const nlohmann::json cause =
        sf->status == JobStatus::failed && sf->cause.empty() ? nlohmann::json("bad_spec") : text_or_null(sf->cause);
    return {{sf->status, cause, text_or_null(sf->reason), code}, false};
  }
  if (e.how == How::batch) return judge_batch_state(e.state, sf, dir_seen);
  // A worker that says it stopped cleanly at a signal (its resume file written) was interrupted, whatever exit the
  // launcher read: a Ctrl-C reaches the workers of the terminal's process group before the sweep has seen it, and
  // a child reaped in that moment reads as no exit code at all.
  if (sf && sf->status == JobStatus::interrupted)
    return {{JobStatus::interrupted, "interrupted", stopping ? "sweep interrupted" : text_or_null(sf->reason),
             sf->exit_code ? nlohmann::json(*sf->exit_code) : nlohmann::json(nullptr)},
            !stopping};
  if (stopping && (e.how == How::signaled || e.code == kExitInterrupted))
    return {{JobStatus::interrupted, "interrupted", "sweep interrupted",
             e.how == How::exited ? nlohmann::json(e.code) : nullptr},
            false};
  if (e.how == How::signaled)
    return {{JobStatus::crashed, fmt::format("signal {}", e.code), fmt::format("killed by signal {}", e.code), nullptr},
            true};
  const auto status = status_of_exit(e.code);
  const std::string reason = sf && !sf->reason.empty() ? sf->reason : "";
  switch (status) {
    case JobStatus::finished:
      return {{status, nullptr, nullptr, e.code}, false};
    case JobStatus::diverged:
      return {{status, text_or_null(sf ? sf->cause : ""), text_or_null(reason), e.code}, false};
    case JobStatus::failed:
      return {{status, sf && !sf->cause.empty() ? sf->cause : "bad_spec", text_or_null(reason), e.code}, false};
    case JobStatus::interrupted:
      return {{status, "interrupted", "stopped by a signal", e.code}, true};
    default:
      return {{JobStatus::crashed, "crash", fmt::format("exit code {}{}", e.code, reason.empty() ? "" : ": " + reason),
               e.code},
              true};
  }
}

// The jobs another job will start from, which are adopted from their records only with their checkpoint. A dependant
// whose result is at hand (finished in the database, or a finished record in its folder that take_jobs adopts, as
// scripts/records.sh restores them) starts from nothing.
std::set<std::string> checkpoints_needed(const std::vector<PlannedJob>& jobs, Store& store, const std::string& runs) {
  std::set<std::string> out;
  for (const auto& j : jobs) {
    if (j.depends_on.empty()) continue;
    const auto row = store.job(j.id);
    if (row && row->status == JobStatus::finished) continue;
    const auto record = read_status((fs::path(runs) / j.id).string());
    if (row && row->status == JobStatus::pending && row->attempts == 0 && record &&
        record->status == JobStatus::finished)
      continue;
    out.insert(j.depends_on);
  }
  return out;
}

nlohmann::json job_file(const PlannedJob& j, const SweepOptions& opt) {
  auto spec = j.spec;
  spec["threads"] = opt.threads_per_job;
  if (!j.depends_on.empty())
    spec["init_checkpoint"] = (fs::path(opt.runs_dir) / j.depends_on / "best.safetensors").string();
  return spec;
}

Scheduler::Scheduler(Store& store, Launcher& launcher, int64_t sweep_id, std::vector<PlannedJob> jobs, SweepOptions opt)
    : store_(store),
      launcher_(launcher),
      sweep_id_(sweep_id),
      jobs_(std::move(jobs)),
      opt_(std::move(opt)),
      pid_(static_cast<int64_t>(::getpid())),
      host_(host_name()) {
  take_jobs();
}

// Decides what each applicable job needs: results that stand are skipped; jobs in flight (on a cluster) are
// watched, not started again; the rest are queued.
void Scheduler::take_jobs() {
  std::vector<std::string> fresh_budget;
  const auto started_from = checkpoints_needed(jobs_, store_, opt_.runs_dir);
  for (const auto& j : jobs_) {
    if (!j.applicable) {
      ++summary_.na;
      continue;
    }
    if (by_id_.count(j.id)) continue;  // two cells whose settings came out the same (a derived setting): one job
    by_id_[j.id] = &j;
    const auto row = store_.job(j.id);
    if (!row) continue;
    const auto s = row->status;
    const bool local_row = row->launcher.empty() || row->launcher == "local";
    const bool stale_local =
        s == JobStatus::running && local_row && !(row->owner_host == host_ && pid_alive(row->owner_pid));
    if (is_active(s) && !local_row) {
      // On a cluster: submitted by an earlier run of this sweep (or another sweep) to this launcher, it is watched,
      // never submitted again; another launcher's job is left to it.
      if (row->launcher == launcher_.name()) {
        mine_.insert(j.id);
        ++total_;
      } else {
        ++summary_.skipped;
      }
      continue;
    }
    if (s == JobStatus::pending && row->attempts == 0 &&
        adopt_record(store_, j.id, (fs::path(opt_.runs_dir) / j.id).string(), started_from.count(j.id) > 0,
                     opt_.retry_diverged)) {
      ++summary_.adopted;
      continue;
    }
    if (s == JobStatus::finished || (s == JobStatus::diverged && !opt_.retry_diverged) ||
        (is_final_failure(s) && !opt_.retry_failed) || (opt_.continuing && s != JobStatus::pending && !stale_local)) {
      ++summary_.skipped;
      continue;
    }
    if (s == JobStatus::diverged || is_final_failure(s)) store_.start_over(j.id, opt_.runs_dir);
    if (!opt_.continuing) fresh_budget.push_back(j.id);  // a new sweep: a fresh retry budget
    if (s == JobStatus::running && stale_local)
      store_.set_outcome(j.id, {JobStatus::interrupted, "orchestrator_died", "its orchestrator is gone", nullptr});
    mine_.insert(j.id);
    queue_.push_back(&j);
    ++total_;
  }
  store_.db().transaction([&] {
    auto u = store_.db().prepare("UPDATE jobs SET retries_used = 0 WHERE id = ?");
    for (const auto& id : fresh_budget) {
      u.bind(1, id);
      u.run();
    }
  });
}

void Scheduler::report(const PlannedJob& j, const std::string& what) {
  if (opt_.progress) fmt::print("\n");
  fmt::print(stderr, "fwlab: {} {} [{}] {}\n{}", j.stage, coords_label(j.coords), j.id, what,
             log_tail(fs::path(opt_.runs_dir) / j.id / "worker.log", 8));
}

void Scheduler::record(const Ended& e) {
  const auto it = by_id_.find(e.job_id);
  if (it == by_id_.end() || !mine_.count(e.job_id)) return;  // another sweep's job: its own sync records it
  const auto& j = *it->second;
  if (e.how == Ended::How::not_submitted) {  // pending again, no attempt spent: it goes out with the next wave
    queue_.push_back(&j);
    return;
  }
  const auto dir = fs::path(opt_.runs_dir) / j.id;
  ingest_events(store_.db(), j.id, dir.string());
  crash_point("before_outcome");
  std::error_code ec;
  const bool dir_seen = fs::exists(dir / "status.json", ec) || fs::exists(dir / "slurm_job.json", ec) ||
                        fs::exists(dir / "events.jsonl", ec);
  // A signal this sweep has received but not yet acted on counts as stopping: its workers got it too.
  const bool stopping = stopping_ || g_signals > 0;
  const auto verdict = judge(e, read_status(dir.string()), stopping, dir_seen);
  const auto& o = verdict.outcome;
  const auto row = store_.job(j.id);
  const std::string why = o.reason.is_string()  ? o.reason.get<std::string>()
                          : o.cause.is_string() ? o.cause.get<std::string>()
                                                : "";
  if (verdict.retryable && !stopping && row && row->retries_used < opt_.retries) {
    report(j, fmt::format("{} ({}); retrying", to_string(o.status), why));
    store_.retry(j.id, o);
    queue_.push_back(&j);
    return;
  }
  store_.set_outcome(j.id, o);
  crash_point("after_outcome");
  ended(j, o.status);
  if (is_result(o.status) && resumed_from_step(store_.db(), j.id)) ++summary_.resumed;
  switch (o.status) {
    case JobStatus::finished:
      ++summary_.finished;
      return;
    case JobStatus::diverged:
      ++summary_.diverged;
      break;
    case JobStatus::failed:
      ++summary_.failed;
      break;
    case JobStatus::timeout:
      ++summary_.timeout;
      break;
    case JobStatus::cancelled:
      ++summary_.cancelled;
      break;
    case JobStatus::interrupted:
      ++summary_.interrupted;
      return;
    default:
      ++summary_.crashed;
      break;
  }
  const auto diverged = o.status == JobStatus::diverged ? divergence_text(store_.db(), j.id) : std::string();
  report(j, fmt::format("{}: {}", to_string(o.status),
                        !diverged.empty() ? diverged
                        : why.empty()     ? "see the record"
                                          : why));
}

void Scheduler::start_ready() {
  std::vector<Launch> wave;
  size_t slots = launcher_.free_slots();
  for (auto it = queue_.begin(); it != queue_.end() && wave.size() < slots;) {
    const auto& j = **it;
    if (!j.depends_on.empty()) {
      const auto dep = store_.job(j.depends_on);
      const auto dep_status = dep ? dep->status : JobStatus::blocked;
      // A job it starts from that this sweep runs (again) and has not ended yet is waited for.
      const bool dep_waits = dep_status == JobStatus::pending || is_active(dep_status) ||
                             (mine_.count(j.depends_on) && !done_.count(j.depends_on));
      if (dep_status != JobStatus::finished) {
        if (dep_waits) {
          ++it;
          continue;
        }
        const auto why = fmt::format("job {} it starts from did not finish", j.depends_on);
        store_.set_outcome(j.id, {JobStatus::blocked, "dependency", why, nullptr});
        ended(j, JobStatus::blocked);
        report(j, "blocked: " + why);
        ++summary_.blocked;
        it = queue_.erase(it);
        continue;
      }
    }
    const auto row = store_.job(j.id);
    if (row && (is_result(row->status) || row->status == JobStatus::failed)) {  // another sweep ran it meanwhile
      done_.insert(j.id);
      ++summary_.skipped;
      ++ended_;
      it = queue_.erase(it);
      continue;
    }
    if (!store_.claim(j.id, launcher_.name(), pid_, host_)) {
      ++it;
      continue;
    }
    const auto dir = fs::path(opt_.runs_dir) / j.id;
    fs::create_directories(dir);
    // An earlier attempt's status.json ("interrupted") must not speak for this one if it dies before writing its own.
    fs::remove(dir / "status.json");
    write_file_atomic((dir / "job.json").string(), job_file(j, opt_).dump(2) + "\n");
    wave.push_back({&j, dir.string()});
    it = queue_.erase(it);
  }
  if (wave.empty()) return;
  launcher_.start(wave, store_, sweep_id_);
  if (opt_.lines)
    for (const auto& l : wave) log_job_started(*l.job);
}

void Scheduler::ended(const PlannedJob& j, JobStatus status) {
  done_.insert(j.id);
  ++ended_;
  if (opt_.lines) log_job_ended(store_.db(), j, std::string(to_string(status)));
}

bool Scheduler::round() {
  // Two orchestrators reconciling the same jobs (a sync beside a sweep) take turns: each round sees the other's
  // submissions and endings whole.
  struct RoundLock {
    int fd = -1;
    explicit RoundLock(const std::string& path) {
      if (path.empty()) return;
      fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      if (fd >= 0) ::flock(fd, LOCK_EX);
    }
    ~RoundLock() {
      if (fd >= 0) ::close(fd);
    }
  } lock(opt_.round_lock);
  for (const auto& e : launcher_.collect(store_)) record(e);
  for (const auto& id : launcher_.in_flight(store_))
    if (mine_.count(id)) ingest_events(store_.db(), id, (fs::path(opt_.runs_dir) / id).string());
  if (!stopping_) start_ready();
  size_t in_flight = 0;  // after the wave just started
  for (const auto& id : launcher_.in_flight(store_)) in_flight += mine_.count(id);
  summary_.in_flight = static_cast<int>(in_flight);
  return (!queue_.empty() && !stopping_) || in_flight > 0;
}

void Scheduler::stop(bool now) {
  stopping_ = true;
  summary_.interrupted_by_signal = true;
  launcher_.stop(now);
  if (now) return;
  // Jobs claimed but never started go back to pending.
  for (const auto* j : queue_) {
    const auto row = store_.job(j->id);
    if (row && row->status == JobStatus::running && row->owner_pid == pid_)
      store_.set_outcome(j->id, {JobStatus::pending, nullptr, nullptr, nullptr});
  }
}

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

SweepSummary drive(Scheduler& s, const DriveOptions& d) {
  double last_draw = 0;
  auto draw = [&](bool force) {
    if (!d.progress || (!force && unix_time() - last_draw < 0.5)) return;
    last_draw = unix_time();
    const int width = 30;
    const size_t total = s.total(), ended = s.ended();
    const int filled = total ? static_cast<int>(width * ended / total) : width;
    fmt::print("\r[{}{}] {}/{} jobs, {} in flight   ", std::string(static_cast<size_t>(filled), '#'),
               std::string(static_cast<size_t>(width - filled), '.'), ended, total, s.summary().in_flight);
    std::fflush(stdout);
  };
  SweepTicker ticker;
  auto tick = [&](bool force) {
    if (d.lines) ticker.tick(s.ended(), s.total(), s.summary().in_flight, s.summary().unsuccessful(), force);
  };
  bool stopping = false;
  int poll_ms = 1;
  size_t last_state = 0;
  while (true) {
    if (g_signals && !stopping) {
      stopping = true;
      if (d.progress) fmt::print("\n");
      if (s.detachable())
        fmt::print(stderr, "fwlab: interrupted: the {} job(s) on the cluster go on; `fwlab sync` records them\n",
                   s.summary().in_flight);
      else
        fmt::print(stderr, "fwlab: interrupted: stopping {} running job(s) (Ctrl-C again to kill at once)\n",
                   s.summary().in_flight);
      s.stop(false);
    }
    if (g_signals >= 2) s.stop(true);
    const bool more = s.round();
    if (!more || d.detach || (stopping && s.detachable())) break;
    draw(false);
    tick(false);
    // Poll fast right after something happened (short jobs), backing off while nothing does.
    const size_t state_now = s.ended() + s.queued() * 100000 + static_cast<size_t>(s.summary().in_flight) * 1000000000;
    // A cluster's queue is asked once a second at most; the local pool's processes every 50 ms.
    poll_ms = state_now != last_state ? 1 : std::min(s.detachable() ? 1000 : 50, poll_ms * 2);
    last_state = state_now;
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
  draw(true);
  tick(true);
  if (d.progress) fmt::print("\n");
  return s.summary();
}

}  // namespace fwlab

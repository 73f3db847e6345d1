#include "harness/executor.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <boost/process.hpp>
#include <boost/process/extend.hpp>
#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "harness/ingest.h"
#include "worker/events.h"

namespace fwlab {

namespace bp = boost::process;
namespace fs = std::filesystem;

namespace {

std::atomic<int> g_signals{0};

void on_signal(int) { g_signals.fetch_add(1); }

double now() { return unix_time(); }

std::string host_name() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return host;
}

bool pid_alive(int64_t pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

std::string log_tail(const std::string& path, size_t lines) {
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

int gpu_count() {
  int n = 0;
  std::error_code ec;
  while (fs::exists(fmt::format("/dev/nvidia{}", n), ec)) ++n;
  return n;
}

// Runs in the worker process between fork and exec: the parent-death signal is set before the worker's slow
// start (libtorch takes about a second), and a parent that died before it leaves the worker nothing to do.
struct WatchParent : boost::process::extend::handler {
  pid_t parent;
  template <typename Executor>
  void on_exec_setup(Executor&) const {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(kOrphanExit);
  }
  static constexpr int kOrphanExit = 4;  // the worker's "interrupted"
};

struct Running {
  const PlannedJob* job;
  std::unique_ptr<bp::child> child;
  double started;
  double timeout;
  bool timed_out = false;
  double term_sent = 0;
  int gpu = -1;
};

}  // namespace

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int64_t mark_orphans_interrupted(Db& db) {
  const std::string host = host_name();
  int64_t marked = 0;
  db.transaction([&] {
    // Rows (id, owner pid) of `sql` whose owner is no longer alive on this host.
    auto dead = [&](const char* sql) {
      std::vector<nlohmann::json> ids;
      auto q = db.prepare(sql);
      q.bind(1, host);
      while (q.step())
        if (!pid_alive(q.integer(1))) ids.push_back(q.value(0));
      return ids;
    };
    auto sweep = db.prepare("UPDATE sweeps SET status = 'interrupted', finished = ? WHERE id = ? AND status = 'running'");
    for (const auto& id : dead("SELECT id, pid FROM sweeps WHERE status = 'running' AND host = ? AND pid IS NOT NULL")) {
      sweep.bind(1, now()).bind(2, id);
      sweep.run();
      ++marked;
    }
    auto job = db.prepare("UPDATE jobs SET status = 'interrupted', cause = 'orchestrator_died', reason = 'its orchestrator is gone', "
                          "owner_pid = NULL WHERE id = ? AND status = 'running'");
    for (const auto& id : dead("SELECT id, owner_pid FROM jobs WHERE status = 'running' AND owner_host = ? AND owner_pid IS NOT NULL")) {
      job.bind(1, id);
      job.run();
      ++marked;
    }
  });
  return marked;
}

void register_jobs(Db& db, int64_t sweep_id, const std::vector<PlannedJob>& jobs, const ExecOptions& opt) {
  db.transaction([&] {
    auto cell = db.prepare(
        "INSERT OR REPLACE INTO cells(experiment, profile, stage, coords, job_id, applicable) VALUES(?,?,?,?,?,?)");
    auto job = db.prepare(
        "INSERT OR IGNORE INTO jobs(id, experiment, stage, coords, config, depends_on, status, created, dir, params, "
        "state_elements) VALUES(?,?,?,?,?,?,'pending',?,?,?,?)");
    auto link = db.prepare("INSERT OR IGNORE INTO sweep_jobs(sweep_id, job_id) VALUES(?,?)");
    for (const auto& j : jobs) {
      cell.bind(1, opt.experiment).bind(2, opt.profile).bind(3, j.stage).bind(4, j.coords.dump());
      if (j.applicable) cell.bind(5, j.id);
      else cell.bind_null(5);
      cell.bind(6, static_cast<int64_t>(j.applicable));
      cell.run();
      if (!j.applicable) continue;
      job.bind(1, j.id).bind(2, opt.experiment).bind(3, j.stage).bind(4, j.coords.dump()).bind(5, j.spec.dump())
          .bind(6, j.depends_on).bind(7, now()).bind(8, (fs::path(opt.runs_dir) / j.id).string()).bind(9, j.params)
          .bind(10, j.state.elements_at(j.context));
      job.run();
      link.bind(1, sweep_id).bind(2, j.id);
      link.run();
    }
  });
}

SweepSummary run_sweep(Db& db, int64_t sweep_id, const std::vector<PlannedJob>& jobs, const ExecOptions& opt) {
  register_jobs(db, sweep_id, jobs, opt);
  SweepSummary summary;
  const std::string host = host_name();
  const int64_t me = static_cast<int64_t>(getpid());
  const int gpus = gpu_count();

  auto status_of = [&](const std::string& id) {
    auto q = db.prepare("SELECT status, owner_pid, owner_host, attempts FROM jobs WHERE id = ?");
    q.bind(1, id);
    q.step();
    return std::make_tuple(q.text(0), q.is_null(1) ? int64_t{0} : q.integer(1), q.text(2), q.integer(3));
  };
  auto set_status = [&](const PlannedJob& j, const std::string& status, const nlohmann::json& cause, const nlohmann::json& reason,
                        const nlohmann::json& exit_code) {
    auto u = db.prepare("UPDATE jobs SET status = ?, cause = ?, reason = ?, exit_code = ?, finished = ?, owner_pid = NULL WHERE id = ?");
    u.bind(1, status).bind(2, cause).bind(3, reason).bind(4, exit_code).bind(5, now()).bind(6, j.id);
    u.run();
  };

  // Decide what each applicable job needs; jobs whose results stand are skipped.
  std::vector<const PlannedJob*> todo;
  for (const auto& j : jobs) {
    if (!j.applicable) {
      ++summary.na;
      continue;
    }
    auto [status, owner, owner_host, attempts] = status_of(j.id);
    const bool stale_running = status == "running" && !(owner_host == host && pid_alive(owner));
    if (status == "finished" || (status == "diverged" && !opt.retry_diverged) || (status == "failed" && !opt.retry_failed)) {
      ++summary.skipped;
      continue;
    }
    if ((status == "diverged" || status == "failed") || stale_running) {
      // A result that is retried starts over in a fresh directory; the old one is kept beside it.
      const auto dir = fs::path(opt.runs_dir) / j.id;
      if (status != "running" && fs::exists(dir)) {
        fs::rename(dir, fs::path(opt.runs_dir) / fmt::format("{}.attempt-{}", j.id, attempts));
        forget_record(db, j.id);
      }
      if (status != "running") set_status(j, "pending", nullptr, nullptr, nullptr);
      else set_status(j, "interrupted", "orchestrator_died", "its orchestrator is gone", nullptr);
    }
    todo.push_back(&j);
  }

  std::map<std::string, const PlannedJob*> by_id;
  for (const auto* j : todo) by_id[j->id] = j;
  std::vector<Running> running;
  std::set<std::string> done;  // ended in this sweep (any terminal state)
  std::map<std::string, int> tries;
  size_t total = todo.size(), ended = 0;
  double last_draw = 0;

  auto draw = [&](bool force) {
    if (!opt.progress || (!force && now() - last_draw < 0.5)) return;
    last_draw = now();
    const int width = 30;
    const int filled = total ? static_cast<int>(width * ended / total) : width;
    fmt::print("\r[{}{}] {}/{} jobs, {} running   ", std::string(static_cast<size_t>(filled), '#'),
               std::string(static_cast<size_t>(width - filled), '.'), ended, total, running.size());
    std::fflush(stdout);
  };
  auto report_failure = [&](const PlannedJob& j, const std::string& what) {
    if (opt.progress) fmt::print("\n");
    fmt::print(stderr, "fwlab: {} {} [{}] {}\n{}", j.stage, coords_label(j.coords), j.id, what,
               log_tail((fs::path(opt.runs_dir) / j.id / "worker.log").string(), 8));
  };

  auto launch = [&](const PlannedJob& j, int gpu) {
    const auto dir = fs::path(opt.runs_dir) / j.id;
    fs::create_directories(dir);
    auto spec = j.spec;
    spec["threads"] = opt.threads_per_job;
    if (!j.depends_on.empty()) spec["init_checkpoint"] = (fs::path(opt.runs_dir) / j.depends_on / "best.safetensors").string();
    if (gpu >= 0 && !spec.contains("device")) spec["device"] = "cuda";
    write_file_atomic((dir / "job.json").string(), spec.dump(2) + "\n");
    auto env = boost::this_process::environment();
    env.erase("OPENBLAS_CORETYPE");
    if (gpu >= 0) env["CUDA_VISIBLE_DEVICES"] = std::to_string(gpu);
    const auto log = (dir / "worker.log").string();
    Running r{&j, nullptr, now(), j.timeout_s > 0 ? j.timeout_s : opt.timeout_s};
    r.gpu = gpu;
    env["FWLAB_PARENT_PID"] = std::to_string(me);
    try {
      r.child = std::make_unique<bp::child>(bp::exe = opt.worker, bp::args = {"run", dir.string()},
                                            (bp::std_out & bp::std_err) > log, bp::std_in < bp::null, env,
                                            WatchParent{{}, static_cast<pid_t>(me)});
    } catch (const std::exception& e) {  // e.g. the worker was removed since the sweep checked it
      set_status(j, "crashed", "launch", fmt::format("cannot start {}: {}", opt.worker, e.what()), nullptr);
      report_failure(j, fmt::format("crashed: cannot start {}: {}", opt.worker, e.what()));
      ++summary.crashed;
      done.insert(j.id);
      ++ended;
      return false;
    }
    // owner_*: the orchestrator that runs the job (host: where the worker says it ran, from its record).
    auto u = db.prepare("UPDATE jobs SET status = 'running', owner_pid = ?, owner_host = ?, started = ?, attempts = attempts + 1 WHERE id = ?");
    u.bind(1, me).bind(2, host).bind(3, now()).bind(4, j.id);
    u.run();
    running.push_back(std::move(r));
    return true;
  };

  // Claims a job for this process; false when another live orchestrator is running it.
  auto claim = [&](const PlannedJob& j) {
    bool ok = false;
    db.transaction([&] {
      auto [status, owner, owner_host, attempts] = status_of(j.id);
      if (status == "running" && owner != me && owner_host == host && pid_alive(owner)) return;
      if (status == "finished") return;
      auto u = db.prepare("UPDATE jobs SET status = 'running', owner_pid = ?, owner_host = ? WHERE id = ?");
      u.bind(1, me).bind(2, host).bind(3, j.id);
      u.run();
      ok = true;
    });
    return ok;
  };

  auto finish_job = [&](Running& r) {
    const auto& j = *r.job;
    const auto dir = fs::path(opt.runs_dir) / j.id;
    ingest_events(db, j.id, dir.string());
    const int raw = r.child->native_exit_code();
    const bool signaled = WIFSIGNALED(raw);
    const int code = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    nlohmann::json status_file = nlohmann::json::object();
    {
      std::ifstream in(dir / "status.json");
      if (in) status_file = nlohmann::json::parse(in, nullptr, false);
      if (!status_file.is_object()) status_file = nlohmann::json::object();
    }
    const auto cause = status_file.value("cause", nlohmann::json(nullptr));
    const auto reason = status_file.value("reason", nlohmann::json(nullptr));
    ++tries[j.id];
    auto retry_or = [&](const std::string& status, const std::string& c, const std::string& why) {
      if (tries[j.id] <= opt.retries && !g_signals) {
        report_failure(j, fmt::format("{} ({}); retrying", status, why));
        set_status(j, "pending", c, why, code);
        return false;
      }
      report_failure(j, fmt::format("{} ({})", status, why));
      set_status(j, status, c, why, code);
      ++(status == "timeout" ? summary.timeout : summary.crashed);
      return true;
    };
    bool terminal = true;
    if (r.timed_out) {
      terminal = retry_or("timeout", "timeout", fmt::format("no result after {:.0f} s", r.timeout));
    } else if (g_signals && (code == 4 || signaled)) {
      set_status(j, "interrupted", "interrupted", "sweep interrupted", code);
      ++summary.interrupted;
    } else if (code == 0) {
      set_status(j, "finished", nullptr, nullptr, 0);
      ++summary.finished;
    } else if (code == 3) {
      set_status(j, "diverged", cause, reason, 3);
      ++summary.diverged;
      report_failure(j, fmt::format("diverged: {}", reason.is_string() ? reason.get<std::string>() : "see the record"));
    } else if (code == 2) {
      set_status(j, "failed", cause.is_null() ? nlohmann::json("bad_spec") : cause, reason, 2);
      ++summary.failed;
      report_failure(j, "failed: bad spec or data");
    } else {
      terminal = retry_or("crashed", signaled ? fmt::format("signal {}", WTERMSIG(raw)) : "crash",
                          signaled ? fmt::format("killed by signal {}", WTERMSIG(raw))
                                   : fmt::format("exit code {}{}", code, reason.is_string() ? ": " + reason.get<std::string>() : ""));
    }
    if (terminal) {
      done.insert(j.id);
      ++ended;
    }
  };

  std::deque<const PlannedJob*> queue(todo.begin(), todo.end());
  std::vector<bool> gpu_busy(static_cast<size_t>(gpus), false);
  bool stopping = false;
  int poll_ms = 1;
  size_t last_state = 0;
  while (!queue.empty() || !running.empty()) {
    if (g_signals && !stopping) {
      stopping = true;
      if (opt.progress) fmt::print("\n");
      fmt::print(stderr, "fwlab: interrupted: stopping {} running job(s) (Ctrl-C again to kill at once)\n", running.size());
      for (auto& r : running) {
        ::kill(static_cast<pid_t>(r.child->id()), SIGTERM);
        r.term_sent = now();
      }
      summary.interrupted_by_signal = true;
    }
    // Launch what is ready, up to the pool size.
    for (auto it = queue.begin(); !stopping && it != queue.end() && static_cast<int>(running.size()) < opt.jobs;) {
      const auto& j = **it;
      bool ready = true, blocked = false;
      if (!j.depends_on.empty()) {
        auto [dep_status, o, h, a] = status_of(j.depends_on);
        ready = dep_status == "finished";
        blocked = !ready && (done.count(j.depends_on) || (dep_status != "pending" && dep_status != "running" &&
                                                          !by_id.count(j.depends_on)));
      }
      if (blocked) {
        set_status(j, "blocked", "dependency", fmt::format("job {} it starts from did not finish", j.depends_on), nullptr);
        report_failure(j, fmt::format("blocked: job {} it starts from did not finish", j.depends_on));
        ++summary.blocked;
        done.insert(j.id);
        ++ended;
        it = queue.erase(it);
        continue;
      }
      if (ready || j.depends_on.empty()) {
        auto [status, o, h, a] = status_of(j.id);
        if (status == "finished" || status == "diverged" || status == "failed") {  // another sweep ran it meanwhile
          ++summary.skipped;
          done.insert(j.id);
          ++ended;
          it = queue.erase(it);
          continue;
        }
      }
      if (!ready || !claim(j)) {
        ++it;
        continue;
      }
      int gpu = -1;
      for (size_t g = 0; g < gpu_busy.size(); ++g)
        if (!gpu_busy[g]) {
          gpu = static_cast<int>(g);
          gpu_busy[g] = true;
          break;
        }
      if (!launch(j, gpu) && gpu >= 0) gpu_busy[static_cast<size_t>(gpu)] = false;
      it = queue.erase(it);
    }
    // Poll the running workers.
    for (auto it = running.begin(); it != running.end();) {
      ingest_events(db, it->job->id, (fs::path(opt.runs_dir) / it->job->id).string());
      if (g_signals >= 2 || (it->term_sent > 0 && now() - it->term_sent > 10)) it->child->terminate();
      if (!it->timed_out && it->timeout > 0 && now() - it->started > it->timeout) {
        it->timed_out = true;
        it->child->terminate();  // its exit code means nothing now; the timeout is recorded by us
      }
      if (it->child->running()) {
        ++it;
        continue;
      }
      it->child->wait();
      if (it->gpu >= 0) gpu_busy[static_cast<size_t>(it->gpu)] = false;
      finish_job(*it);
      const auto* j = it->job;
      it = running.erase(it);
      if (!done.count(j->id) && !stopping) queue.push_back(j);  // retry
    }
    if (stopping && running.empty()) {
      for (const auto* j : queue) {
        auto [status, o, h, a] = status_of(j->id);
        if (status == "running" && o == me) set_status(*j, "pending", nullptr, nullptr, nullptr);
      }
      break;
    }
    draw(false);
    // Poll fast right after something happened (short jobs), backing off to 50 ms while nothing does.
    const size_t state_now = running.size() + ended * 1000 + queue.size() * 1000000;
    poll_ms = state_now != last_state ? 1 : std::min(50, poll_ms * 2);
    last_state = state_now;
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
  draw(true);
  if (opt.progress) fmt::print("\n");
  return summary;
}

}  // namespace fwlab

#include "harness/local_launcher.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/process.hpp>
#include <boost/process/extend.hpp>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>

#include "contract/job/events.h"

namespace fwlab {

namespace bp = boost::process;
namespace fs = std::filesystem;

namespace {

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
    if (::getppid() != parent) ::_exit(kExitInterrupted);
  }
};

// The job's worker.log opened for appending, with a line that starts this attempt's part.
std::unique_ptr<FILE, int (*)(FILE*)> open_worker_log(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "a"), &std::fclose);
  if (f) {
    std::fseek(f.get(), 0, SEEK_END);
    const bool earlier = std::ftell(f.get()) > 0;
    char when[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    std::fprintf(f.get(), "%s== fwlab: attempt started %s ==\n", earlier ? "\n" : "", when);
    std::fflush(f.get());
  }
  return f;
}

}  // namespace

struct LocalLauncher::Running {
  std::string job_id;
  std::unique_ptr<bp::child> child;
  double started = 0, timeout = 0;
  bool timed_out = false, killed = false;  // killed: by us (SIGKILL), whose status Boost.Process never reads back
  int gpu = -1;
};

LocalLauncher::LocalLauncher(LocalSettings settings)
    : settings_(std::move(settings)), gpu_busy_(static_cast<size_t>(gpu_count()), false) {}

LocalLauncher::~LocalLauncher() = default;

size_t LocalLauncher::free_slots() const {
  const auto pool = static_cast<size_t>(std::max(1, settings_.jobs));
  return stopping_ || running_.size() >= pool ? 0 : pool - running_.size();
}

namespace {

// The worker's environment: a copy of this process's (this_process::environment() itself is the live one, whose
// changes would stay in the orchestrator and reach every later worker: a GPU index among them).
bp::environment worker_environment(int gpu, int64_t parent) {
  bp::environment env = boost::this_process::environment();
  env.erase("OPENBLAS_CORETYPE");  // a forced core type runs OpenBLAS's slower generic kernels
  // libgomp's default wait spins on its core for a thread that the scheduler has parked: with anything else busy on
  // the machine (another sweep, a build, tests side by side) a catalog smoke of two-thread jobs ran 2 min 26 s
  // instead of 27 s. Passive waits sleep; alone on the machine they cost nothing measurable (an MQAR learns step of
  // two threads: ~100 ms either way). A policy the user set stands.
  if (env.find("OMP_WAIT_POLICY") == env.end()) env["OMP_WAIT_POLICY"] = "PASSIVE";
  if (gpu >= 0) env["CUDA_VISIBLE_DEVICES"] = std::to_string(gpu);
  env["FWLAB_PARENT_PID"] = std::to_string(parent);
  return env;
}

}  // namespace

void LocalLauncher::start(const std::vector<Launch>& wave, Store& store, int64_t) {
  const int64_t me = static_cast<int64_t>(::getpid());
  const std::string host = host_name();
  for (const auto& l : wave) {
    auto r = std::make_unique<Running>();
    r->job_id = l.job->id;
    r->started = unix_time();
    r->timeout = l.job->timeout_s > 0 ? l.job->timeout_s : settings_.timeout_s;
    for (size_t g = 0; g < gpu_busy_.size(); ++g)
      if (!gpu_busy_[g]) {
        r->gpu = static_cast<int>(g);
        gpu_busy_[g] = true;
        break;
      }
    const auto env = worker_environment(r->gpu, me);
    // Appended, each attempt under a line of its own: a resumed or retried job keeps its earlier attempts' output.
    const auto log = open_worker_log((fs::path(l.dir) / "worker.log").string());
    try {
      if (!log) throw std::runtime_error(fmt::format("cannot open {}/worker.log", l.dir));
      r->child = std::make_unique<bp::child>(bp::exe = settings_.worker, bp::args = {"run", l.dir},
                                             (bp::std_out & bp::std_err) > log.get(), bp::std_in < bp::null, env,
                                             WatchParent{{}, static_cast<pid_t>(me)});
    } catch (const std::exception& e) {  // e.g. the worker was removed since the sweep checked it
      if (r->gpu >= 0) gpu_busy_[static_cast<size_t>(r->gpu)] = false;
      launch_failures_.push_back({l.job->id, Ended::How::launch_failed, -1, "",
                                  fmt::format("cannot start {}: {}", settings_.worker, e.what())});
      continue;
    }
    // owner_*: the orchestrator that runs the job (host: where the worker says it ran, from its record).
    store.mark_started_local(l.job->id, me, host);
    running_.push_back(std::move(r));
  }
}

std::vector<Ended> LocalLauncher::collect(Store&) {
  std::vector<Ended> out;
  out.swap(launch_failures_);
  const double now = unix_time();
  for (auto it = running_.begin(); it != running_.end();) {
    auto& r = **it;
    if (stopping_ && stop_sent_ > 0 && now - stop_sent_ > 10 && r.child->running()) {  // it ignores SIGTERM
      r.killed = true;
      r.child->terminate();
    }
    if (!r.timed_out && r.timeout > 0 && now - r.started > r.timeout) {
      r.timed_out = true;
      r.child->terminate();  // its exit code means nothing now; the timeout is recorded by the scheduler
    }
    if (r.child->running()) {
      ++it;
      continue;
    }
    r.child->wait();
    if (r.gpu >= 0) gpu_busy_[static_cast<size_t>(r.gpu)] = false;
    const int raw = r.child->native_exit_code();
    Ended e{r.job_id, Ended::How::exited, -1, "", ""};
    if (r.timed_out) {
      e.how = Ended::How::timed_out;
      e.detail = fmt::format("no result after {:.0f} s", r.timeout);
    } else if (r.killed) {  // terminate() reaps the child without keeping its status: it is our SIGKILL
      e.how = Ended::How::signaled;
      e.code = SIGKILL;
    } else if (WIFSIGNALED(raw)) {
      e.how = Ended::How::signaled;
      e.code = WTERMSIG(raw);
    } else {
      e.code = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    }
    out.push_back(std::move(e));
    it = running_.erase(it);
  }
  return out;
}

std::vector<std::string> LocalLauncher::in_flight(Store&) {
  std::vector<std::string> ids;
  for (const auto& r : running_) ids.push_back(r->job_id);
  return ids;
}

void LocalLauncher::stop(bool now) {
  if (!stopping_) {
    stopping_ = true;
    stop_sent_ = unix_time();
    for (auto& r : running_) ::kill(static_cast<pid_t>(r->child->id()), SIGTERM);
  }
  if (now)
    for (auto& r : running_)
      if (r->child->running()) r->killed = true, r->child->terminate();
}

}  // namespace fwlab

// `fwlab sweep` (an experiment file's jobs, run by the local pool or on Slurm) and `fwlab sync` (cluster sweeps
// still open).
#include <boost/process.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <functional>
#include <optional>
#include <thread>

#include "analysis/spec.h"
#include "cli/commands.h"
#include "cli/planning.h"
#include "contract/version.h"
#include "harness/local_launcher.h"
#include "harness/scheduler.h"
#include "harness/slurm_launcher.h"
#include "harness/store.h"

namespace fwlab::cli {

namespace fs = std::filesystem;

namespace {

// The job directories' folder: made if missing, and it must take files.
void check_runs_dir(const std::string& runs) {
  std::error_code ec;
  fs::create_directories(runs, ec);
  if (ec) throw ArgumentError(fmt::format("--runs {}: cannot create the folder: {}", runs, ec.message()));
  if (!fs::is_directory(runs, ec)) throw ArgumentError(fmt::format("--runs {}: not a folder", runs));
  const auto probe = fs::path(runs) / fmt::format(".fwlab-probe-{}", ::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw ArgumentError(fmt::format("--runs {}: cannot write there: {}", runs, std::strerror(errno)));
  ::close(fd);
  fs::remove(probe, ec);
}

std::string fmt_elements(int64_t n) {
  if (n >= 1'000'000) return fmt::format("{:.1f}M", static_cast<double>(n) / 1e6);
  if (n >= 10'000) return fmt::format("{:.1f}k", static_cast<double>(n) / 1e3);
  return std::to_string(n);
}

// 124439808 -> "124,439,808".
std::string grouped(int64_t n) {
  auto digits = std::to_string(n);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<size_t>(i), ",");
  return digits;
}

void print_dry_run(const Experiment& ex, const std::string& profile, const std::vector<PlannedJob>& planned,
                   const Common& c) {
  std::map<std::string, std::string> known;
  if (fs::exists(c.db_path)) {
    Db db(c.db_path, true);
    auto q = db.prepare("SELECT id, status FROM jobs");
    while (q.step()) known[q.text(0)] = q.text(1);
  }
  fmt::print("{} ({} profile): {} cells\n", ex.name, profile.empty() ? "no" : profile, planned.size());
  fmt::print("{:<10} {:<40} {:<17} {:<11} {:>13} {:>14}\n", "stage", "cell", "job", "status", "params", "state/seq");
  for (const auto& j : planned) {
    const auto status = !j.applicable ? "n/a" : known.count(j.id) ? known[j.id] : "new";
    const auto state = j.applicable ? fmt::format("{} ({}B)", fmt_elements(j.state.elements_at(j.context)),
                                                  fmt_elements(j.state.elements_at(j.context) * 4))
                                    : "-";
    // Exact counts (124,439,808 for GPT-2 small); "?" where the source checkpoint cannot be read yet.
    const auto params = !j.applicable ? "-" : j.model.is_null() ? "?" : grouped(j.params);
    fmt::print("{:<10} {:<40} {:<17} {:<11} {:>13} {:>14}\n", j.stage, coords_label(j.coords),
               j.applicable ? j.id : "-", status, params, j.model.is_null() && j.applicable ? "?" : state);
  }
}

// Per stage, the job keys whose values differ between its applicable cells, with the values they take: what the
// grid (and the profile and --set) actually vary.
void print_varying_settings(const std::vector<PlannedJob>& planned) {
  std::map<std::string, std::map<std::string, std::set<std::string>>> values;  // stage -> key -> values
  std::map<std::string, int> cells;
  for (const auto& j : planned) {
    if (!j.applicable) continue;
    ++cells[j.stage];
    const auto flat = j.spec.flatten();  // kept: items() of a temporary would dangle
    for (const auto& [key, value] : flat.items()) values[j.stage][key].insert(value.dump());
  }
  for (const auto& [stage, keys] : values) {
    std::vector<std::string> lines;
    for (const auto& [key, seen] : keys) {
      // A key only some cells have varies too: those without it take the worker's default.
      size_t with = 0;
      for (const auto& j : planned)
        with += j.applicable && j.stage == stage && j.spec.contains(nlohmann::json::json_pointer(key));
      if (seen.size() == 1 && with == static_cast<size_t>(cells[stage])) continue;
      auto dotted = key.substr(1);  // a JSON pointer, "/model/mixer/rule"
      std::replace(dotted.begin(), dotted.end(), '/', '.');
      lines.push_back(fmt::format("  {}: {}{}", dotted, fmt::join(seen, " | "),
                                  with < static_cast<size_t>(cells[stage]) ? " | (default)" : ""));
    }
    fmt::print("settings that differ between the {} cells of stage {}:{}\n", cells[stage], stage,
               lines.empty() ? " none" : "");
    for (const auto& l : lines) fmt::print("{}\n", l);
  }
}

void print_summary(const std::string& name, const SweepSummary& s) {
  fmt::print(
      "{}: {} finished, {} diverged, {} failed, {} crashed, {} timed out, {} blocked, {} cancelled, {} interrupted, "
      "{} already done, {} n/a{}{}{}\n",
      name, s.finished, s.diverged, s.failed, s.crashed, s.timeout, s.blocked, s.cancelled, s.interrupted, s.skipped,
      s.na, s.adopted ? fmt::format(", {} taken from the records in their folders", s.adopted) : "",
      s.in_flight ? fmt::format(", {} in flight", s.in_flight) : "",
      s.resumed ? fmt::format(" ({} of the finished and diverged resumed from an earlier attempt)", s.resumed) : "");
}

// Ends a sweep's row: interrupted (a signal stopped the local pool), or, once none of its jobs is queued or in
// flight, finished or failed (some did not end well). A cluster sweep with jobs left stays open for sync.
void close_sweep(Store& store, int64_t sweep_id, const Scheduler& scheduler) {
  const auto& s = scheduler.summary();
  const bool more = scheduler.queued() > 0 || s.in_flight > 0, detachable = scheduler.detachable();
  if (more && detachable) return;
  if (more && !s.interrupted_by_signal) return;
  // A cluster sweep's endings were recorded over several syncs: its jobs say how it went.
  const bool unsuccessful = detachable ? store.sweep_has_unsuccessful_jobs(sweep_id) : s.unsuccessful() > 0;
  store.close_sweep(sweep_id, s.interrupted_by_signal ? SweepStatus::interrupted
                              : unsuccessful          ? SweepStatus::failed
                                                      : SweepStatus::finished);
}

int sweep_exit(const SweepSummary& s) {
  if (s.interrupted_by_signal) return 130;
  return s.unsuccessful() ? 1 : 0;
}

// The folder of the job directories (beside the database unless --runs), checked with the database path; on Slurm
// also the cluster's clients, and the path made absolute (the nodes read it).
std::string checked_runs_dir(const SweepArgs& a, const Common& c, const std::string& kind) {
  std::string runs = a.runs.empty() ? (fs::path(c.db_path).parent_path() / "runs").string() : a.runs;
  if (fs::path(c.db_path).parent_path().empty() && a.runs.empty()) runs = "runs";
  check_db_path(c.db_path, true);
  check_runs_dir(runs);
  if (kind != "slurm") return runs;
  for (const char* client : {"sbatch", "squeue", "scontrol"})
    if (boost::process::search_path(client).empty())
      throw ArgumentError(
          fmt::format("--executor slurm: {} not found on PATH: run fwlab on a Slurm submit host", client));
  return fs::absolute(runs).lexically_normal().string();
}

// Threads per job (Slurm: the executor's cpus; locally the cores shared among the parallel jobs), retries, output.
SweepOptions sweep_options(const SweepArgs& a, const Experiment& ex, const std::string& kind, const std::string& runs,
                           int jobs) {
  SweepOptions opt;
  opt.runs_dir = runs;
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  opt.threads_per_job = kind == "slurm"
                            ? static_cast<int>(ex.executor.cpus > 0 ? ex.executor.cpus : std::max(1, a.threads))
                        : a.threads > 0 ? a.threads
                                        : std::max(1, cores / jobs);
  opt.retries = a.retries;
  opt.retry_failed = a.retry_failed;
  opt.retry_diverged = a.retry_diverged;
  opt.progress = ::isatty(STDOUT_FILENO) != 0;
  opt.lines = !opt.progress;
  return opt;
}

// A sweep's rounds: its jobs, then, whenever a round ends with cells whose derived settings read jobs that have now
// ended, those cells planned and run (the jobs already done are skipped), until a round plans nothing new.
class SweepRounds {
 public:
  SweepRounds(Store& store, Launcher& launcher, int64_t sweep_id, const SweepOptions& opt, std::string experiment,
              std::string profile)
      : store_(store),
        launcher_(launcher),
        sweep_id_(sweep_id),
        opt_(opt),
        experiment_(experiment),
        profile_(profile) {}

  SweepSummary run(std::vector<PlannedJob> planned, std::vector<std::string> waiting,
                   const std::function<PlannedExperiment()>& replan, const DriveOptions& drive_options) {
    SweepSummary total;
    std::set<std::string> known;
    for (int round = 0;; ++round) {
      // A later round runs only the jobs no earlier round had: one that crashed there is not started again here.
      std::vector<PlannedJob> to_run;
      for (const auto& j : planned)
        if (round == 0 || !known.count(j.id)) to_run.push_back(j);
      for (const auto& j : planned) known.insert(j.id);
      store_.register_jobs(sweep_id_, planned, experiment_, profile_, opt_.runs_dir);
      auto scheduler = std::make_unique<Scheduler>(store_, launcher_, sweep_id_, std::move(to_run), opt_);
      add(total, drive(*scheduler, drive_options), round == 0);
      queued_ = scheduler->queued();
      in_flight_ = (queued_ > 0 || total.in_flight > 0) && launcher_.detachable();
      waiting_ = waiting;
      if (waiting.empty() || total.interrupted_by_signal || in_flight_ || drive_options.detach) {
        close_sweep(store_, sweep_id_, *scheduler);
        return total;
      }
      try {
        auto next = replan();
        const bool fresh = std::any_of(next.jobs.begin(), next.jobs.end(),
                                       [&](const PlannedJob& j) { return j.applicable && !known.count(j.id); });
        planned = std::move(next.jobs), waiting_ = waiting = std::move(next.waiting);
        if (!fresh) {  // the inputs they wait for are not this sweep's to run (another sweep, a cluster)
          // Cells whose derived setting came out as a job already run still get their cell and derivation rows.
          store_.register_jobs(sweep_id_, planned, experiment_, profile_, opt_.runs_dir);
          close_sweep(store_, sweep_id_, *scheduler);
          return total;
        }
        if (opt_.lines) fmt::print("fwlab: planned the cells whose derived settings' inputs have ended\n");
      } catch (const DerivationError& e) {
        error_ = e.what(), waiting_.clear();  // the error names the inputs; the old waiting lines are stale
        close_sweep(store_, sweep_id_, *scheduler);
        return total;
      }
    }
  }

  bool left_in_flight() const { return in_flight_; }
  size_t queued() const { return queued_; }
  const std::vector<std::string>& waiting() const { return waiting_; }
  const std::optional<std::string>& derivation_error() const { return error_; }

 private:
  // A later round's "already done" are the jobs earlier rounds ran: counted once.
  static void add(SweepSummary& t, const SweepSummary& s, bool first) {
    t.finished += s.finished, t.diverged += s.diverged, t.failed += s.failed, t.crashed += s.crashed;
    t.timeout += s.timeout, t.blocked += s.blocked, t.cancelled += s.cancelled, t.interrupted += s.interrupted;
    t.na = s.na, t.in_flight = s.in_flight, t.resumed += s.resumed, t.adopted += s.adopted;
    if (first) t.skipped = s.skipped;
    t.interrupted_by_signal = t.interrupted_by_signal || s.interrupted_by_signal;
  }

  Store& store_;
  Launcher& launcher_;
  int64_t sweep_id_;
  const SweepOptions& opt_;
  std::string experiment_, profile_;
  size_t queued_ = 0;
  bool in_flight_ = false;
  std::vector<std::string> waiting_;
  std::optional<std::string> error_;
};

}  // namespace

int cmd_sweep(const SweepArgs& a, const Common& c) {
  Experiment ex;
  std::vector<PlannedJob> planned;
  std::vector<std::string> waiting;
  try {
    // With a retry flag a derived setting's failed inputs are run again first (their cells wait meanwhile); the
    // rounds after that plan strictly, so inputs that fail again are named.
    auto plan = plan_checked(a.file, a.profile, c, !(a.retry_failed || a.retry_diverged));
    ex = std::move(plan.ex);
    planned = std::move(plan.jobs);
    waiting = std::move(plan.waiting);
    plot_specs(ex, table_spec(ex));  // a broken [table], [[plot]] or [published] is found now, not after hours of jobs
    published_spec(ex, table_spec(ex));
  } catch (const ExperimentError& e) {
    fmt::print(stderr, "fwlab: {}\n", e.what());
    return 2;
  } catch (const DerivationError& e) {
    fmt::print(stderr, "fwlab: {}\n", e.what());
    return 1;
  }
  if (a.dry_run) {
    print_dry_run(ex, a.profile, planned, c);
    print_varying_settings(planned);
    for (const auto& w : waiting) fmt::print("not planned yet (a derived setting reads results): {}\n", w);
    return 0;
  }
  // Every argument and every job's input files are checked before anything is written.
  if (const auto problems = check_job_inputs(ex, planned, FWLAB_SOURCE_DIR); !problems.empty()) {
    for (const auto& p : problems) fmt::print(stderr, "fwlab: {}\n", p);
    fmt::print(stderr, "fwlab: {} input problem(s) found; nothing was run\n", problems.size());
    return 2;
  }
  const std::string kind = a.executor.empty() ? ex.executor.kind : a.executor;
  if (a.detach && kind != "slurm")
    throw ArgumentError("--detach: only jobs on a cluster outlive fwlab (use --executor slurm)");
  const auto worker = resolve_worker(a.worker.empty() ? default_worker() : a.worker);
  const std::string runs = checked_runs_dir(a, c, kind);
  const int jobs = kind == "slurm" ? 1 : std::max(1, a.jobs);
  SweepOptions opt = sweep_options(a, ex, kind, runs, jobs);
  std::unique_ptr<Launcher> launcher;
  nlohmann::json executor = {{"kind", "local"}};
  if (kind == "slurm") {
    SlurmSettings settings{ex.executor, worker, runs};
    executor = to_json(settings);
    launcher = std::make_unique<SlurmLauncher>(settings);
    opt.round_lock = c.db_path + ".lock";
  } else {
    launcher = std::make_unique<LocalLauncher>(LocalSettings{worker, jobs, a.timeout});
  }
  Db db(c.db_path);
  Store store(db);
  store.mark_orphans_interrupted();  // sweeps killed earlier are not left "running"
  const int64_t sweep_id =
      store.open_sweep({ex.name,
                        fs::absolute(a.file).string(),  // `fwlab site` finds the file again from anywhere
                        a.profile,
                        fmt::format("sweep {}{} --executor {}", a.file, experiment_args(a.profile, c), kind),
                        host_name(),
                        static_cast<int64_t>(getpid()),
                        executor,
                        {{"retries", opt.retries}, {"runs_dir", opt.runs_dir}, {"threads", opt.threads_per_job}}});
  install_signal_handlers();
  SweepRounds rounds{store, *launcher, sweep_id, opt, ex.name, a.profile};
  const auto s = rounds.run(planned, waiting, [&] { return plan_checked(a.file, a.profile, c); },
                            {opt.progress, a.detach, opt.lines});
  print_summary(ex.name, s);
  if (rounds.left_in_flight())
    fmt::print(
        "{}: {} job(s) in flight, {} waiting for others; `fwlab sync --db {}` records them and submits the next "
        "waves\n",
        ex.name, s.in_flight, rounds.queued(), c.db_path);
  for (const auto& w : rounds.waiting()) fmt::print(stderr, "fwlab: not planned yet: {}\n", w);
  if (rounds.derivation_error()) fmt::print(stderr, "fwlab: {}\n", *rounds.derivation_error());
  return rounds.derivation_error() ? std::max(1, sweep_exit(s)) : sweep_exit(s);
}

// Cluster sweeps still open: each is reconciled from its jobs' status files and squeue, its finished records
// ingested, its next wave submitted. `wait`: until every one has ended.
int cmd_sync(const Common& c, bool wait, bool quiet) {
  check_db_path(c.db_path, false);
  Db db(c.db_path);
  Store store(db);
  int code = 0;
  install_signal_handlers();
  const auto open = store.open_cluster_sweeps();
  if (open.empty() && !quiet) fmt::print("no cluster sweep in flight\n");
  for (const auto& sweep : open) {
    const auto settings = slurm_settings_from_json(sweep.executor);
    SweepOptions opt;
    opt.runs_dir = settings.runs_dir;
    opt.retries = sweep.options.value("retries", 1);
    opt.threads_per_job = sweep.options.value("threads", 1);
    opt.continuing = true;
    opt.lines = !quiet;  // sync --wait under Slurm or nohup: the same lines as a sweep
    opt.round_lock = c.db_path + ".lock";
    SlurmLauncher launcher(settings);
    Scheduler scheduler(store, launcher, sweep.id, store.sweep_jobs(sweep.id), opt);
    const auto s = drive(scheduler, {false, !wait, opt.lines});
    close_sweep(store, sweep.id, scheduler);
    if (!quiet) print_summary(fmt::format("{} (sweep {})", sweep.experiment, sweep.id), s);
    code = std::max(code, sweep_exit(s));
  }
  return code;
}

}  // namespace fwlab::cli

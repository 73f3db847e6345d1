// fwlab: experiment files -> jobs -> fwlab-worker processes -> SQLite, and questions about the results.
#include <CLI/CLI.hpp>
#include <boost/process.hpp>
#include <fmt/format.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "analysis/plot.h"
#include "analysis/report.h"
#include "analysis/compare.h"
#include "analysis/table.h"
#include "harness/db.h"
#include "harness/local_launcher.h"
#include "harness/scheduler.h"
#include "harness/slurm_launcher.h"
#include "harness/store.h"
#include "harness/experiment.h"
#include "harness/ingest.h"
#include "harness/plan.h"
#include "contract/events.h"
#include "contract/job_status.h"

namespace fs = std::filesystem;
using namespace fwlab;

namespace {

const char* kExitCodes =
    "Exit codes:\n"
    "  0  done: every job finished (diverged jobs are results too)\n"
    "  1  some jobs failed, crashed, timed out or were blocked (the database says which)\n"
    "  2  bad input: the experiment file or an argument (the message names file:line:column and key)\n"
    "  130  interrupted (SIGINT/SIGTERM); running jobs were stopped and marked interrupted\n";


std::string default_worker() {
  std::error_code ec;
  auto self = fs::read_symlink("/proc/self/exe", ec);
  auto candidate = self.parent_path().parent_path() / "worker" / "fwlab-worker";
  return fs::exists(candidate) ? candidate.string() : "fwlab-worker";
}

// A bad argument: the message names it; exit code 2, and nothing has been written yet.
class ArgumentError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The worker executable as it will be started: a path to an executable file, or a name found on PATH.
std::string resolve_worker(const std::string& worker) {
  auto executable = [](const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  if (worker.find('/') != std::string::npos) {
    std::error_code ec;
    if (!fs::exists(worker, ec)) throw ArgumentError(fmt::format("--worker {}: no such file", worker));
    if (!executable(worker)) throw ArgumentError(fmt::format("--worker {}: not an executable file", worker));
    return fs::absolute(worker).string();
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    const auto colon = std::min(dirs.find(':', start), dirs.size());
    const auto candidate = fs::path(dirs.substr(start, colon - start)) / worker;
    if (executable(candidate)) return candidate.string();
    start = colon + 1;
  }
  throw ArgumentError(fmt::format("--worker {}: not found on PATH (give its path, or build fwlab-worker)", worker));
}

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

struct Common {
  std::string db_path = "results/fwlab.db";
  std::vector<std::string> sets;  // --set KEY=VALUE over the experiment file
};

// " --profile P --set K=V ...": how to name the same experiment on another command line.
std::string experiment_args(const std::string& profile, const Common& c) {
  std::string out = profile.empty() ? "" : " --profile " + profile;
  for (const auto& s : c.sets) out += " --set " + s;
  return out;
}

struct SweepArgs {
  std::string file, profile, runs, worker, executor;
  int jobs = 1, threads = 0, retries = 1;
  double timeout = 0;
  bool dry_run = false, retry_failed = false, retry_diverged = false, detach = false;
};

void print_dry_run(const Experiment& ex, const std::string& profile, const std::vector<PlannedJob>& planned, const Common& c) {
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
    fmt::print("{:<10} {:<40} {:<17} {:<11} {:>13} {:>14}\n", j.stage, coords_label(j.coords), j.applicable ? j.id : "-", status,
               params, j.model.is_null() && j.applicable ? "?" : state);
  }
}

void print_summary(const std::string& name, const SweepSummary& s) {
  fmt::print("{}: {} finished, {} diverged, {} failed, {} crashed, {} timed out, {} blocked, {} cancelled, {} interrupted, "
             "{} already done, {} n/a{}\n",
             name, s.finished, s.diverged, s.failed, s.crashed, s.timeout, s.blocked, s.cancelled, s.interrupted, s.skipped, s.na,
             s.in_flight ? fmt::format(", {} in flight", s.in_flight) : "");
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
  store.close_sweep(sweep_id, s.interrupted_by_signal ? SweepStatus::interrupted : unsuccessful ? SweepStatus::failed : SweepStatus::finished);
}

int sweep_exit(const SweepSummary& s) {
  if (s.interrupted_by_signal) return 130;
  return s.unsuccessful() ? 1 : 0;
}

int cmd_sweep(const SweepArgs& a, const Common& c) {
  Experiment ex;
  std::vector<PlannedJob> planned;
  try {
    ex = load_experiment(a.file, a.profile, c.sets);
    planned = plan_jobs(ex, FWLAB_SOURCE_DIR, kFwlabVersion);
    plot_specs(ex, table_spec(ex));  // a broken [table], [[plot]] or [published] is found now, not after hours of jobs
    published_spec(ex, table_spec(ex));
  } catch (const ExperimentError& e) {
    fmt::print(stderr, "fwlab: {}\n", e.what());
    return 2;
  }
  if (a.dry_run) {
    print_dry_run(ex, a.profile, planned, c);
    return 0;
  }
  // Every argument and every job's input files are checked before anything is written.
  if (const auto problems = check_job_inputs(ex, planned, FWLAB_SOURCE_DIR); !problems.empty()) {
    for (const auto& p : problems) fmt::print(stderr, "fwlab: {}\n", p);
    fmt::print(stderr, "fwlab: {} input problem(s) found; nothing was run\n", problems.size());
    return 2;
  }
  const std::string kind = a.executor.empty() ? ex.executor.kind : a.executor;
  if (a.detach && kind != "slurm") throw ArgumentError("--detach: only jobs on a cluster outlive fwlab (use --executor slurm)");
  const auto worker = resolve_worker(a.worker.empty() ? default_worker() : a.worker);
  std::string runs = a.runs.empty() ? (fs::path(c.db_path).parent_path() / "runs").string() : a.runs;
  if (fs::path(c.db_path).parent_path().empty() && a.runs.empty()) runs = "runs";
  check_db_path(c.db_path, true);
  check_runs_dir(runs);
  if (kind == "slurm") {
    for (const char* client : {"sbatch", "squeue", "scontrol"})
      if (boost::process::search_path(client).empty())
        throw ArgumentError(fmt::format("--executor slurm: {} not found on PATH: run fwlab on a Slurm submit host", client));
    runs = fs::absolute(runs).lexically_normal().string();  // the nodes read it: no path relative to here
  }
  SweepOptions opt;
  opt.runs_dir = runs;
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  const int jobs = kind == "slurm" ? 1 : std::max(1, a.jobs);
  opt.threads_per_job = kind == "slurm" ? static_cast<int>(ex.executor.cpus > 0 ? ex.executor.cpus : std::max(1, a.threads))
                        : a.threads > 0 ? a.threads : std::max(1, cores / jobs);
  opt.retries = a.retries;
  opt.retry_failed = a.retry_failed;
  opt.retry_diverged = a.retry_diverged;
  opt.progress = ::isatty(STDOUT_FILENO) != 0;
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
  const int64_t sweep_id = store.open_sweep({ex.name, a.file, a.profile,
                                             fmt::format("sweep {}{} --executor {}", a.file, experiment_args(a.profile, c), kind), host_name(),
                                             static_cast<int64_t>(getpid()), executor,
                                             {{"retries", opt.retries}, {"runs_dir", opt.runs_dir}, {"threads", opt.threads_per_job}}});
  store.register_jobs(sweep_id, planned, ex.name, a.profile, opt.runs_dir);
  install_signal_handlers();
  Scheduler scheduler(store, *launcher, sweep_id, planned, opt);
  const auto s = drive(scheduler, {opt.progress, a.detach});
  close_sweep(store, sweep_id, scheduler);
  print_summary(ex.name, s);
  if ((scheduler.queued() > 0 || s.in_flight > 0) && launcher->detachable())
    fmt::print("{}: {} job(s) in flight, {} waiting for others; `fwlab sync --db {}` records them and submits the next waves\n",
               ex.name, s.in_flight, scheduler.queued(), c.db_path);
  return sweep_exit(s);
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
    opt.round_lock = c.db_path + ".lock";
    SlurmLauncher launcher(settings);
    Scheduler scheduler(store, launcher, sweep.id, store.sweep_jobs(sweep.id), opt);
    const auto s = drive(scheduler, {false, !wait});
    close_sweep(store, sweep.id, scheduler);
    if (!quiet) print_summary(fmt::format("{} (sweep {})", sweep.experiment, sweep.id), s);
    code = std::max(code, sweep_exit(s));
  }
  return code;
}

int cmd_status(const std::string& file, const std::string& profile, const Common& c) {
  if (!fs::exists(c.db_path)) {
    fmt::print(stderr, "fwlab: --db {}: no results database yet (run a sweep first)\n", c.db_path);
    return 2;
  }
  std::string experiment;
  if (!file.empty()) {
    try {
      experiment = load_experiment(file, profile, c.sets).name;
    } catch (const ExperimentError& e) {
      fmt::print(stderr, "fwlab: {}\n", e.what());
      return 2;
    }
  }
  // Status marks what a killed orchestrator left "running" and reconciles cluster sweeps (when the database is
  // writable; else it only reads).
  try {
    Db writable(c.db_path);
    Store store(writable);
    store.mark_orphans_interrupted();
    if (!store.open_cluster_sweeps().empty()) cmd_sync(c, false, true);
  } catch (const DbError&) {
  } catch (const SlurmError& e) {
    fmt::print(stderr, "fwlab: status: cannot ask Slurm ({}); counts as last recorded\n", e.what());
  }
  Db db(c.db_path, true);
  auto q = db.prepare(fmt::format(
      "SELECT c.experiment, c.profile, COALESCE(j.status, 'n/a'), COUNT(*), "
      "AVG(CASE WHEN j.status IN ({}) THEN j.finished - j.started END) "
      "FROM cells c LEFT JOIN jobs j ON j.id = c.job_id WHERE (? = '' OR c.experiment = ?) "
      "GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
      sql_list({JobStatus::finished, JobStatus::diverged})));
  q.bind(1, experiment).bind(2, experiment);
  std::map<std::pair<std::string, std::string>, std::map<std::string, int64_t>> counts;
  std::map<std::pair<std::string, std::string>, double> mean_s;
  while (q.step()) {
    counts[{q.text(0), q.text(1)}][q.text(2)] = q.integer(3);
    if (!q.is_null(4)) mean_s[{q.text(0), q.text(1)}] = q.real(4);
  }
  if (counts.empty()) fmt::print("no sweeps{}\n", experiment.empty() ? "" : " of " + experiment);
  for (const auto& [key, by_status] : counts) {
    int64_t total = 0, left = 0;
    std::string parts;
    for (const auto& [st, n] : by_status) {
      total += n;
      if (const auto status = parse_job_status(st); status && (*status == JobStatus::pending || is_active(*status) || *status == JobStatus::interrupted))
        left += n;
      parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", n, st);
    }
    std::string eta = left == 0 ? "done" : mean_s.count(key) ? fmt::format("ETA ~{:.0f} s (serial)", mean_s[key] * static_cast<double>(left)) : "ETA unknown";
    fmt::print("{} [{}]: {} cells: {}; {}\n", key.first, key.second.empty() ? "no profile" : key.second, total, parts, eta);
  }
  return 0;
}

struct QueryResult {
  std::vector<std::string> names;
  std::vector<std::vector<nlohmann::json>> rows;
};

void print_query_result(const QueryResult& r, const std::string& format) {
  auto cell = [](const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.is_null() ? std::string() : v.dump(); };
  if (format == "csv") {
    const auto quote = csv_field;
    std::vector<std::string> fields;
    for (const auto& n : r.names) fields.push_back(quote(n));
    fmt::print("{}\n", fmt::join(fields, ","));
    for (const auto& row : r.rows) {
      fields.clear();
      for (const auto& v : row) fields.push_back(quote(cell(v)));
      fmt::print("{}\n", fmt::join(fields, ","));
    }
    return;
  }
  std::vector<size_t> width(r.names.size());
  for (size_t i = 0; i < r.names.size(); ++i) width[i] = r.names[i].size();
  for (const auto& row : r.rows)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], std::min<size_t>(60, cell(row[i]).size()));
  auto print_row = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t i = 0; i < cells.size(); ++i) line += fmt::format("{}{:<{}}", i ? "  " : "", cells[i].substr(0, 60), width[i]);
    fmt::print("{}\n", line);
  };
  print_row(r.names);
  std::vector<std::string> rule;
  for (auto w : width) rule.push_back(std::string(w, '-'));
  print_row(rule);
  for (const auto& row : r.rows) {
    std::vector<std::string> cells;
    for (const auto& v : row) cells.push_back(cell(v));
    print_row(cells);
  }
}

nlohmann::json query_json(const QueryResult& r) {
  auto out = nlohmann::json::array();
  for (const auto& row : r.rows) {
    nlohmann::json o = nlohmann::json::object();
    for (size_t i = 0; i < r.names.size(); ++i) o[r.names[i]] = row[i];
    out.push_back(o);
  }
  return out;
}

// Every statement of `sql` runs, or none: a statement that would write rejects the whole query.
int cmd_query(const std::string& sql, const std::string& format, const Common& c) {
  Db db(c.db_path, true);
  std::vector<QueryResult> results;
  try {
    for (auto& q : db.prepare_read_only(sql)) {
      QueryResult r;
      for (int i = 0; i < q.columns(); ++i) r.names.push_back(q.name(i));
      while (q.step()) {
        std::vector<nlohmann::json> row;
        for (int i = 0; i < q.columns(); ++i) row.push_back(q.value(i));
        r.rows.push_back(std::move(row));
      }
      results.push_back(std::move(r));
    }
  } catch (const DbError& e) {
    fmt::print(stderr, "fwlab: query: {}\n", e.what());
    return 2;
  }
  if (format == "json") {  // one statement: its rows; several: one array of rows per statement
    auto out = nlohmann::json::array();
    for (const auto& r : results) out.push_back(query_json(r));
    fmt::print("{}\n", (results.size() == 1 ? out[0] : out).dump(2));
    return 0;
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (i) fmt::print("\n");
    print_query_result(results[i], format);
  }
  return 0;
}

// The worker's doctor (worker/doctor.h) in place of this process: the checks need libtorch and the kernels, which
// the harness never links.
int cmd_doctor(const std::string& worker_option, const std::vector<std::string>& args) {
  const auto worker = resolve_worker(worker_option.empty() ? default_worker() : worker_option);
  std::vector<std::string> words{worker, "doctor"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  execv(worker.c_str(), argv.data());
  throw ArgumentError(fmt::format("doctor: cannot start {}: {}", worker, std::strerror(errno)));
}

int cmd_show(const std::string& prefix, const Common& c) {
  if (!fs::exists(c.db_path)) {
    fmt::print(stderr, "fwlab: --db {}: no results database\n", c.db_path);
    return 2;
  }
  Db db(c.db_path, true);
  auto q = db.prepare("SELECT id, experiment, stage, coords, status, cause, reason, attempts, exit_code, dir, config, params, "
                      "state_elements, started, finished, host FROM jobs WHERE id LIKE ? || '%'");
  q.bind(1, prefix);
  std::vector<nlohmann::json> found;
  while (q.step()) {
    nlohmann::json j;
    for (int i = 0; i < q.columns(); ++i) j[q.name(i)] = q.value(i);
    found.push_back(j);
  }
  if (found.empty()) {
    fmt::print(stderr, "fwlab: show {}: no job with that id or prefix\n", prefix);
    return 2;
  }
  if (found.size() > 1) {
    fmt::print(stderr, "fwlab: show {}: ambiguous prefix, {} jobs match\n", prefix, found.size());
    return 2;
  }
  const auto& j = found[0];
  auto str = [](const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
  fmt::print("job {}\n  experiment {}  stage {}  cell {}\n  status {}  cause {}  attempts {}  exit code {}\n  reason {}\n  params {}  state elements {}  host {}\n  dir {}\n",
             str(j["id"]), str(j["experiment"]), str(j["stage"]), coords_label(nlohmann::json::parse(str(j["coords"]))),
             str(j["status"]), str(j["cause"]), str(j["attempts"]), str(j["exit_code"]), str(j["reason"]), str(j["params"]),
             str(j["state_elements"]), str(j["host"]), str(j["dir"]));
  fmt::print("  config {}\n", str(j["config"]));
  auto m = db.prepare("SELECT key, COUNT(*), MIN(step), MAX(step) FROM metrics WHERE job_id = ? GROUP BY key ORDER BY key");
  m.bind(1, str(j["id"]));
  fmt::print("curves:\n");
  while (m.step()) {
    auto first = db.prepare("SELECT value FROM metrics WHERE job_id = ? AND key = ? ORDER BY step LIMIT 1");
    first.bind(1, str(j["id"])).bind(2, m.text(0));
    first.step();
    auto last = db.prepare("SELECT value FROM metrics WHERE job_id = ? AND key = ? ORDER BY step DESC LIMIT 1");
    last.bind(1, str(j["id"])).bind(2, m.text(0));
    last.step();
    fmt::print("  {:<16} {} points, steps {}..{}: {} -> {}\n", m.text(0), m.integer(1), m.integer(2), m.integer(3), str(first.value(0)),
               str(last.value(0)));
  }
  auto e = db.prepare("SELECT split, step, checkpoint, loss, ppl, bpc, accuracy FROM evals WHERE job_id = ? ORDER BY split DESC, step");
  e.bind(1, str(j["id"]));
  fmt::print("evaluations:\n");
  while (e.step())
    fmt::print("  {:<5} step {:>6} {:<4} loss {} ppl {} bpc {} acc {}\n", e.text(0), e.integer(1), e.text(2), str(e.value(3)),
               str(e.value(4)), str(e.value(5)), str(e.value(6)));
  auto d = db.prepare("SELECT step, cause, value, last_finite_loss, lr, first_nonfinite_layer, state_layer FROM divergences WHERE job_id = ?");
  d.bind(1, str(j["id"]));
  while (d.step())
    fmt::print("divergence: step {} cause {} value {} last finite loss {} lr {} layer {}\n", d.integer(0), d.text(1), d.text(2),
               str(d.value(3)), str(d.value(4)), d.is_null(5) ? d.text(6) : d.text(5));
  std::ifstream log(fs::path(str(j["dir"])) / "worker.log");
  std::deque<std::string> tail;
  std::string line;
  while (std::getline(log, line)) {
    tail.push_back(line);
    if (tail.size() > 10) tail.pop_front();
  }
  fmt::print("log tail:\n");
  for (const auto& l : tail) fmt::print("  | {}\n", l);
  return 0;
}

// The analysis commands read the file (with its profile) and the database; `body` gets both.
int with_results(const std::string& file, const std::string& profile, const Common& c,
                 const std::function<int(const ResultSet&, const TableSpec&, const std::vector<PlotSpec>&)>& body) {
  try {
    const auto ex = load_experiment(file, profile, c.sets);
    const auto table = table_spec(ex);
    const auto plots = plot_specs(ex, table);
    published_spec(ex, table);  // checked by every analysis command, as [table] and [[plot]] are
    if (!fs::exists(c.db_path)) {
      fmt::print(stderr, "fwlab: --db {}: no results database there (run `fwlab sweep {}{}` first)\n", c.db_path, file,
                 experiment_args(profile, c));
      return 2;
    }
    Db db(c.db_path, true);
    const ResultSet results(ex, profile, db, FWLAB_SOURCE_DIR, kFwlabVersion);
    return body(results, table, plots);
  } catch (const ExperimentError& e) {  // the file's own errors, including those planning its jobs finds
    fmt::print(stderr, "fwlab: {}\n", e.what());
    return 2;
  }
}

// Writes `text` to `out` (atomically) or prints it.
int emit(const std::string& text, const std::string& out) {
  if (out.empty()) {
    fmt::print("{}", text);
    return 0;
  }
  std::error_code ec;
  if (fs::path(out).has_parent_path()) fs::create_directories(fs::path(out).parent_path(), ec);
  try {
    write_file_atomic(out, text);
  } catch (const std::exception& e) {
    fmt::print(stderr, "fwlab: --out {}: {}\n", out, e.what());
    return 2;
  }
  return 0;
}

int cmd_table(const std::string& file, const std::string& profile, const std::string& format, bool compare, const std::string& out,
              const Common& c) {
  if (compare && format != "md") throw ArgumentError("--compare: the comparison is Markdown only (drop --format " + format + ")");
  return with_results(file, profile, c, [&](const ResultSet& results, const TableSpec& spec, const std::vector<PlotSpec>&) {
    const auto t = build_table(results, spec);
    if (compare) {
      const auto published = published_spec(results.experiment(), spec);
      if (!published) {
        fmt::print(stderr, "fwlab: {}: --compare: the file has no [published] section (the paper's numbers) to compare with\n", file);
        return 2;
      }
      return emit(render_comparison(compare_with_published(t, *published)), out);
    }
    return emit(format == "tex" ? render_latex(t) : format == "csv" ? render_csv(t) : render_markdown(t), out);
  });
}

int cmd_report(const std::string& file, const std::string& profile, const std::string& out, const Common& c) {
  return with_results(file, profile, c, [&](const ResultSet& results, const TableSpec&, const std::vector<PlotSpec>&) {
    return emit(divergence_report(results), out);
  });
}

int cmd_plot(const std::string& file, const std::string& profile, const std::string& out, const std::string& gnuplot, const Common& c) {
  return with_results(file, profile, c, [&](const ResultSet& results, const TableSpec& spec, const std::vector<PlotSpec>& plots) {
    const auto dir = out.empty() ? (fs::path(c.db_path).parent_path() / results.experiment().name / "plots").string() : out;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir)) throw ArgumentError(fmt::format("--out {}: cannot create the folder: {}", dir, ec ? ec.message() : "not a folder"));
    try {
      for (const auto& f : make_plots(results, spec, plots, dir, gnuplot))
        fmt::print("{}/{}.png (.svg, .gp): {}\n", dir, f.name, fmt::join(f.series, "; "));
    } catch (const PlotError& e) {
      fmt::print(stderr, "fwlab: plot: {}\n", e.what());
      return 1;
    }
    return 0;
  });
}

}  // namespace

namespace {

void add_db(CLI::App* sub, Common& common) { sub->add_option("--db", common.db_path, "results database")->capture_default_str(); }

void add_set(CLI::App* sub, Common& common) {
  sub->add_option("--set", common.sets, "KEY=VALUE: set a key of the file (a dotted path as a profile writes it, e.g. "
                                        "defaults.data.path=/data/pile or stage.pretrain.init_checkpoint=hf:/models/gpt2), "
                                        "after the profile; repeatable. Give the same --set to table, report and plot")
      ->type_name("KEY=VALUE")->allow_extra_args(false);  // one value per --set: FILE is never taken for one
}

CLI::App* add_sweep(CLI::App& app, SweepArgs& sa, Common& common) {
  auto* sweep = app.add_subcommand("sweep", "expand an experiment file into jobs and run them");
  sweep->add_option("FILE", sa.file, "experiment file (experiments/*.toml)")->required()->check(CLI::ExistingFile);
  sweep->add_option("--profile", sa.profile, "profile of the file: smoke, quick, paper, ...");
  sweep->add_option("--executor", sa.executor, "where the jobs run: local (a pool of processes) or slurm (job arrays); "
                                               "default: the file's [executor], else local")->check(CLI::IsMember({"local", "slurm"}));
  sweep->add_flag("--detach", sa.detach, "slurm: submit what can be submitted and exit; `fwlab sync` (or `status`) goes on");
  sweep->add_option("--jobs,-j", sa.jobs, "local: workers at once")->capture_default_str()->check(CLI::Range(1, 1024));
  sweep->add_option("--threads", sa.threads, "threads per job (default: cores / jobs; slurm: executor.cpus)")->check(CLI::Range(1, 1024));
  sweep->add_option("--runs", sa.runs, "job directories (default: runs/ beside the database; slurm: on a filesystem the nodes share)");
  sweep->add_option("--timeout", sa.timeout, "local: per-job timeout in seconds (0: none; a stage's timeout wins)")->check(CLI::NonNegativeNumber);
  sweep->add_option("--retries", sa.retries, "extra attempts after an infrastructure failure (crash, timeout, preemption, node failure)")
      ->capture_default_str()->check(CLI::Range(0, 100));
  sweep->add_option("--worker", sa.worker, "fwlab-worker executable");
  sweep->add_flag("--dry-run", sa.dry_run, "print the expanded grid with status, parameters and state size; run nothing");
  sweep->add_flag("--retry-failed", sa.retry_failed, "run again jobs that failed (bad spec or data) or were cancelled");
  sweep->add_flag("--retry-diverged", sa.retry_diverged, "run again jobs that diverged");
  add_set(sweep, common);
  add_db(sweep, common);
  return sweep;
}

// Runs a command, turning what it throws into a message and an exit code (fwlab's, see kExitCodes).
int reporting_errors(const std::function<int()>& command) {
  try {
    return command();
  } catch (const ArgumentError& e) {
    fmt::print(stderr, "fwlab: {}\n", e.what());
    return 2;
  } catch (const DbOpenError& e) {
    fmt::print(stderr, "fwlab: --db {}\n", e.what());
    return 2;
  } catch (const ExperimentError& e) {
    fmt::print(stderr, "fwlab: {}\n", e.what());
    return 2;
  } catch (const SlurmError& e) {  // sbatch refused (a partition that does not exist, ...) or Slurm is unreachable
    fmt::print(stderr, "fwlab: slurm: {}\n", e.what());
    return 1;
  } catch (const fs::filesystem_error& e) {  // a path given to fwlab that cannot be used
    fmt::print(stderr, "fwlab: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {  // never a bare `terminate called`: say what went wrong
    fmt::print(stderr, "fwlab: error: {}\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fwlab: run experiment grids of fast-weight models and ask the results database questions"};
  app.footer(kExitCodes);
  app.require_subcommand(1);
  Common common;

  std::string file, profile, sql, format = "table", job;
  SweepArgs sa;
  auto* sweep = add_sweep(app, sa, common);

  bool wait = false;
  auto* sync = app.add_subcommand("sync", "cluster sweeps: record what ended (status files, squeue), ingest it, submit the next waves");
  sync->add_flag("--wait", wait, "keep going until every cluster sweep has ended");
  add_db(sync, common);

  auto* status = app.add_subcommand("status", "counts by status and an ETA, per experiment");
  status->add_option("FILE", file, "only this experiment file")->check(CLI::ExistingFile);
  status->add_option("--profile", profile, "profile of the file");
  add_set(status, common);
  add_db(status, common);

  auto* query = app.add_subcommand("query", "run read-only SQL on the results database (statements that write are refused)");
  query->add_option("SQL", sql, "one or more ;-separated statements that only read: SELECT, WITH, informational PRAGMA. "
                               "A statement that would write (INSERT, UPDATE, DELETE, VACUUM INTO, ATTACH, ...) "
                               "rejects the whole query: nothing runs")->required();
  query->add_option("--format", format, "table, csv or json")->check(CLI::IsMember({"table", "csv", "json"}))->capture_default_str();
  add_db(query, common);

  auto* show = app.add_subcommand("show", "one job: config, status, cause, curves, log tail");
  show->add_option("JOB", job, "job id or a unique prefix")->required();
  add_db(show, common);

  std::string out, gnuplot = "gnuplot", table_format = "md";
  auto* table = app.add_subcommand("table", "the experiment's table from the database (layout: the file's [table])");
  table->add_option("FILE", file, "experiment file")->required()->check(CLI::ExistingFile);
  table->add_option("--profile", profile, "profile of the file");
  table->add_option("--format", table_format, "md, tex (booktabs) or csv")->check(CLI::IsMember({"md", "tex", "csv"}))->capture_default_str();
  table->add_option("--out", out, "write to this file instead of printing");
  bool compare = false;
  table->add_flag("--compare", compare, "beside the paper's own numbers ([published]): orderings, rank correlation, marks");
  add_set(table, common);
  add_db(table, common);

  auto* report = app.add_subcommand("report", "divergence report: each diverged run, stability by setting, learning-rate frontier");
  report->add_option("FILE", file, "experiment file")->required()->check(CLI::ExistingFile);
  report->add_option("--profile", profile, "profile of the file");
  report->add_option("--out", out, "write the Markdown to this file instead of printing");
  add_set(report, common);
  add_db(report, common);

  auto* plot = app.add_subcommand("plot", "figures with gnuplot (PNG, SVG and the .gp script)");
  plot->add_option("FILE", file, "experiment file")->required()->check(CLI::ExistingFile);
  plot->add_option("--profile", profile, "profile of the file");
  plot->add_option("--out", out, "directory for the figures (default: EXPERIMENT/plots beside the database)");
  plot->add_option("--gnuplot", gnuplot, "gnuplot executable")->capture_default_str();
  add_set(plot, common);
  add_db(plot, common);

  std::string doctor_worker;
  auto* doctor = app.add_subcommand("doctor", "check this machine: versions, the device, every custom kernel against libtorch's own "
                                              "form (runs `fwlab-worker doctor`; its --quick, --threads N pass through)");
  doctor->add_option("--worker", doctor_worker, "fwlab-worker executable");
  doctor->allow_extras();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return reporting_errors([&] {
    if (*sweep) return cmd_sweep(sa, common);
    if (*sync) return cmd_sync(common, wait, false);
    if (*status) return cmd_status(file, profile, common);
    if (*query) return cmd_query(sql, format, common);
    if (*table) return cmd_table(file, profile, table_format, compare, out, common);
    if (*report) return cmd_report(file, profile, out, common);
    if (*plot) return cmd_plot(file, profile, out, gnuplot, common);
    if (*doctor) return cmd_doctor(doctor_worker, doctor->remaining());
    return cmd_show(job, common);
  });
}

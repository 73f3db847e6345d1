// fwlab: experiment files -> jobs -> fwlab-worker processes -> SQLite, and questions about the results.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>

#include "cli/commands.h"
#include "cli/subcommands.h"
#include "contract/version.h"
#include "harness/experiment.h"
#include "harness/slurm_launcher.h"

using namespace fwlab;
using namespace fwlab::cli;

namespace {

// What every command's exit code means; sweep and sync have their own (kSweepExitCodes), doctor the worker's.
const char* kExitCodes =
    "Exit codes:\n"
    "  0  done\n"
    "  1  the command failed, or found nothing where it was asked for something (the message says what)\n"
    "  2  bad input: the experiment file or an argument (the message names file:line:column and key)\n";

const char* kSweepExitCodes =
    "Exit codes:\n"
    "  0  done: every job finished (diverged jobs are results too)\n"
    "  1  some jobs failed, crashed, timed out or were blocked (the database says which)\n"
    "  2  bad input: the experiment file or an argument (the message names file:line:column and key)\n"
    "  130  interrupted (SIGINT/SIGTERM); running jobs were stopped and marked interrupted\n";

const char* kDoctorExitCodes =
    "Exit codes:\n"
    "  0  every check passed (or was skipped with its reason)\n"
    "  1  a check failed (printed with the figures that failed it)\n";

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

}  // namespace

namespace {

void add_db(CLI::App* sub, Common& common) {
  sub->add_option("--db", common.db_path, "results database")->capture_default_str();
}

void add_set(CLI::App* sub, Common& common) {
  sub->add_option("--set", common.sets,
                  "KEY=VALUE: a job key for every job (optim.lr=3e-4, lr=3e-4), or a key of the "
                  "file as a profile writes it (defaults.data.path=/data/pile, grid.rule=[\"add\",\"decay\"] "
                  "for a subset), after the profile; repeatable. Give the same --set to status, table, "
                  "report and plot")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);  // one value per --set: FILE is never taken for one
  sub->add_flag("--force", common.force,
                "go on where a --set changes no job (shadowed by a more specific setting of the file, "
                "or setting what every job already has), which is otherwise refused");
}

CLI::App* add_sweep(CLI::App& app, SweepArgs& sa, Common& common) {
  auto* sweep = app.add_subcommand("sweep", "expand an experiment file into jobs and run them");
  sweep->add_option("FILE", sa.file, "experiment file (experiments/*.toml)")->required()->check(CLI::ExistingFile);
  sweep->add_option("--profile", sa.profile, "profile of the file: smoke, quick, paper, ...");
  sweep
      ->add_option("--executor", sa.executor,
                   "where the jobs run: local (a pool of processes) or slurm (job arrays); "
                   "default: the file's [executor], else local")
      ->check(CLI::IsMember({"local", "slurm"}));
  sweep->add_flag("--detach", sa.detach,
                  "slurm: submit what can be submitted and exit; `fwlab sync` (or `status`) goes on");
  sweep->add_option("--jobs,-j", sa.jobs, "local: workers at once")->capture_default_str()->check(CLI::Range(1, 1024));
  sweep->add_option("--threads", sa.threads, "threads per job (default: cores / jobs; slurm: executor.cpus)")
      ->check(CLI::Range(1, 1024));
  sweep->add_option("--runs", sa.runs,
                    "job directories (default: runs/ beside the database; slurm: on a filesystem the nodes share)");
  sweep->add_option("--timeout", sa.timeout, "local: per-job timeout in seconds (0: none; a stage's timeout wins)")
      ->check(CLI::NonNegativeNumber);
  sweep
      ->add_option("--retries", sa.retries,
                   "extra attempts after an infrastructure failure (crash, timeout, preemption, node failure)")
      ->capture_default_str()
      ->check(CLI::Range(0, 100));
  sweep->add_option("--worker", sa.worker, "fwlab-worker executable");
  sweep->add_flag("--dry-run", sa.dry_run,
                  "print the expanded grid with status, parameters and state size; run nothing");
  sweep->add_flag("--retry-failed", sa.retry_failed, "run again jobs that failed (bad spec or data) or were cancelled");
  sweep->add_flag("--retry-diverged", sa.retry_diverged, "run again jobs that diverged");
  sweep->footer(kSweepExitCodes);
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
  } catch (const std::filesystem::filesystem_error& e) {  // a path given to fwlab that cannot be used
    fmt::print(stderr, "fwlab: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {  // never a bare `terminate called`: say what went wrong
    fmt::print(stderr, "fwlab: error: {}\n", e.what());
    return 1;
  }
}

// Everything the command line can set, beside the sweep's own options.
struct Args {
  std::string file, profile, sql, format = "table", job, other_job, curve, out, gnuplot = "gnuplot",
                                  table_format = "md", doctor_worker, doctor_wrong_kernel;
  std::string hypotheses, references, bleu_format = "text", table_name;
  bool wait = false, compare = false, doctor_quick = false, list_figures = false;
  int doctor_threads = 0;
  SiteOptions site;
};

struct Subcommands {
  CLI::App *sweep, *sync, *status, *query, *show, *diff, *table, *report, *plot, *doctor, *site, *serve, *export_,
      *bleu;
};

// The commands that ask the database about jobs: query, show, diff.
void add_job_questions(CLI::App& app, Args& a, Common& common, Subcommands& s) {
  s.query = app.add_subcommand("query",
                               "run read-only SQL on the results database (statements that write are refused); "
                               "views: runs (a row per job), params (job, key, value)");
  s.query
      ->add_option("SQL", a.sql,
                   "one or more ;-separated statements that only read: SELECT, WITH, informational PRAGMA. "
                   "A statement that would write (INSERT, UPDATE, DELETE, VACUUM INTO, ATTACH, ...) "
                   "rejects the whole query: nothing runs")
      ->required();
  s.query
      ->add_option("--format", a.format,
                   "table, csv or json (JSON text in a column, such as a config, is nested as JSON)")
      ->check(CLI::IsMember({"table", "csv", "json"}))
      ->capture_default_str();
  add_db(s.query, common);
  s.show = app.add_subcommand("show", "one job: config, status, cause, curves, log tail");
  s.show->add_option("JOB", a.job, "job id or a unique prefix")->required();
  s.show->add_option("--curve", a.curve,
                     "print one whole series as CSV (step,value): a metric key such as train_loss, "
                     "or SPLIT.FIELD of the evaluations such as valid.ppl");
  s.show->add_option("--out", a.out, "with --curve: write the CSV to this file");
  add_db(s.show, common);
  s.diff = app.add_subcommand("diff", "two jobs: the settings and the results that differ");
  s.diff->add_option("JOB", a.job, "job id or a unique prefix")->required();
  s.diff->add_option("OTHER", a.other_job, "job id or a unique prefix")->required();
  add_db(s.diff, common);
}

// A command on files alone: bleu.
void add_scoring(CLI::App& app, Args& a, Subcommands& s) {
  s.bleu = app.add_subcommand("bleu",
                              "corpus BLEU of translations against references, one segment a line: sacreBLEU's (13a, "
                              "with its signature) and the papers' tokenized BLEU");
  s.bleu->add_option("HYP", a.hypotheses, "the translations")->required();
  s.bleu->add_option("REF", a.references, "the references, line-aligned with HYP")->required();
  s.bleu->add_option("--format", a.bleu_format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
}

// The commands that read an experiment file and the database: table, report, plot.
void add_analysis(CLI::App& app, Args& a, Common& common, Subcommands& s) {
  s.table = app.add_subcommand("table", "the experiment's table from the database (layout: the file's [table])");
  s.table->add_option("FILE", a.file, "experiment file")->required()->check(CLI::ExistingFile);
  s.table->add_option("--format", a.table_format, "md, tex (booktabs) or csv")
      ->check(CLI::IsMember({"md", "tex", "csv"}))
      ->capture_default_str();
  s.table->add_option("--out", a.out, "write to this file instead of printing");
  s.table->add_option("--table", a.table_name, "a further table of the file ([tables.NAME]) instead of [table]");
  s.table->add_flag("--compare", a.compare,
                    "beside the paper's own numbers ([published]): orderings, rank correlation, marks");
  s.report = app.add_subcommand("report",
                                "divergence report: each diverged run, stability by setting, learning-rate frontier");
  s.report->add_option("FILE", a.file, "experiment file")->required()->check(CLI::ExistingFile);
  s.report->add_option("--out", a.out, "write the Markdown to this file instead of printing");
  s.plot = app.add_subcommand("plot", "figures with gnuplot (PNG, SVG and the .gp script)");
  s.plot->add_option("FILE", a.file, "experiment file")->required()->check(CLI::ExistingFile);
  s.plot->add_option("--out", a.out, "directory for the figures (default: EXPERIMENT/plots beside the database)");
  s.plot->add_option("--gnuplot", a.gnuplot, "gnuplot executable")->capture_default_str();
  s.plot->add_flag("--list", a.list_figures,
                   "print the names of the figures the file's jobs make once every one has run (no database read, "
                   "nothing drawn)");
  for (auto* sub : {s.table, s.report, s.plot}) {
    sub->add_option("--profile", a.profile, "profile of the file");
    add_set(sub, common);
    add_db(sub, common);
  }
}

// The results as pages: site (static files) and serve (live).
void add_pages(CLI::App& app, Args& a, Common& common, Subcommands& s) {
  s.site = app.add_subcommand("site",
                              "the results as a static, self-contained HTML site: an index of experiments, each one's "
                              "table, comparison with the paper, divergence report and plots, and a page per job");
  s.site->add_option("--out", a.site.out, "the folder for the pages (index.html, e/, job/)")->required();
  s.serve =
      app.add_subcommand("serve", "the same pages live from the database over HTTP (read-only; running work reloads)");
  s.serve->add_option("--bind", a.site.bind, "address to listen on")->capture_default_str();
  s.serve->add_option("--port", a.site.port, "port (0: any free port, printed)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  s.export_ = app.add_subcommand("export", "the results database in another tool's format: an MLflow file store");
  // tensorboard reaches cmd_export, which says why it is not written; the help offers what works.
  s.export_->add_option("--format", a.format, "mlflow: an MLflow file store")
      ->required()
      ->check(CLI::Validator(
          [](const std::string& v) { return v == "mlflow" || v == "tensorboard" ? "" : "the format is mlflow"; },
          "mlflow"));
  s.export_->add_option("--out", a.out, "the folder (MLflow's mlruns)")->required();
  add_db(s.export_, common);
  for (auto* sub : {s.site, s.serve}) {
    sub->add_option("FILES", a.site.files, "experiment files (default: the catalog, experiments/*.toml)")
        ->check(CLI::ExistingFile);
    sub->add_option("--gnuplot", a.site.gnuplot, "gnuplot executable (the plots)")->capture_default_str();
    add_db(sub, common);
  }
}

void add_run_commands(CLI::App& app, Args& a, SweepArgs& sa, Common& common, Subcommands& s) {
  s.sweep = add_sweep(app, sa, common);
  s.sync = app.add_subcommand(
      "sync", "cluster sweeps: record what ended (status files, squeue), ingest it, submit the next waves");
  s.sync->add_flag("--wait", a.wait, "keep going until every cluster sweep has ended");
  s.sync->footer(kSweepExitCodes);
  add_db(s.sync, common);
  s.status = app.add_subcommand("status", "counts by status and an ETA, per experiment");
  s.status->add_option("FILE", a.file, "only this experiment file")->check(CLI::ExistingFile);
  s.status->add_option("--profile", a.profile, "profile of the file");
  add_set(s.status, common);
  add_db(s.status, common);
  s.doctor = app.add_subcommand("doctor",
                                "check this machine: versions, the device, every custom kernel against libtorch's own "
                                "form (runs `fwlab-worker doctor`)");
  s.doctor->add_option("--worker", a.doctor_worker, "fwlab-worker executable");
  s.doctor->add_flag("--quick", a.doctor_quick, "smaller inputs for the kernel checks (faster)");
  s.doctor->add_option("--threads", a.doctor_threads, "threads for the CPU checks (default: every core)")
      ->check(CLI::Range(1, 1024));
  // A test hook (hidden from --help): that kernel's results come out wrong, so the check must fail.
  s.doctor->add_option("--wrong-kernel", a.doctor_wrong_kernel)->group("");
  s.doctor->footer(kDoctorExitCodes);
}

int run(const Subcommands& s, const Args& a, const SweepArgs& sa, const Common& common) {
  if (*s.sweep) return cmd_sweep(sa, common);
  if (*s.sync) return cmd_sync(common, a.wait, false);
  if (*s.status) return cmd_status(a.file, a.profile, common);
  if (*s.query) return cmd_query(a.sql, a.format, common);
  if (*s.diff) return cmd_diff(a.job, a.other_job, common);
  if (*s.bleu) return cmd_bleu(a.hypotheses, a.references, a.bleu_format);
  if (*s.table) return cmd_table(a.file, a.profile, a.table_format, a.compare, a.out, a.table_name, common);
  if (*s.report) return cmd_report(a.file, a.profile, a.out, common);
  if (*s.plot) return cmd_plot(a.file, a.profile, a.out, a.gnuplot, a.list_figures, common);
  if (*s.doctor) {
    std::vector<std::string> args;
    if (a.doctor_quick) args.push_back("--quick");
    if (a.doctor_threads > 0) args.insert(args.end(), {"--threads", std::to_string(a.doctor_threads)});
    if (!a.doctor_wrong_kernel.empty()) args.insert(args.end(), {"--wrong-kernel", a.doctor_wrong_kernel});
    return cmd_doctor(a.doctor_worker, args);
  }
  if (*s.site) return cmd_site(a.site, common);
  if (*s.serve) return cmd_serve(a.site, common);
  if (*s.export_) return cmd_export(a.format, a.out, common);
  return cmd_show(a.job, a.curve, a.out, common);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fwlab: run experiment grids of fast-weight models and ask the results database questions"};
  app.footer(kExitCodes);
  app.require_subcommand(1);
  app.set_version_flag("--version", fmt::format("fwlab {} (commit {})", kFwlabVersion, kFwlabGitCommit));
  Common common;
  Args args;
  SweepArgs sa;
  Subcommands subs{};
  add_run_commands(app, args, sa, common, subs);
  add_job_questions(app, args, common, subs);
  add_scoring(app, args, subs);
  add_analysis(app, args, common, subs);
  add_pages(app, args, common, subs);
  if (unknown_subcommand(app, argc, argv)) return 2;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return reporting_errors([&] { return run(subs, args, sa, common); });
}

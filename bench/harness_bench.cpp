// Orchestrator overhead, measured side by side in one run: (1) 200 jobs of a trivial worker dispatched by the
// local pool vs the same worker started 200 times directly; (2) ingestion of 1M metric rows from events.jsonl.
// Targets (issue 4): < 20 ms of orchestrator overhead per job, >= 200k rows/s ingested.
#include <fmt/format.h>

#include <boost/process.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "harness/db.h"
#include "harness/local_launcher.h"
#include "harness/scheduler.h"
#include "harness/experiment.h"
#include "harness/ingest.h"
#include "harness/plan.h"

namespace fs = std::filesystem;
using namespace fwlab;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int n_jobs = argc > 1 ? std::stoi(argv[1]) : 200;
  const int64_t n_rows = argc > 2 ? std::stoll(argv[2]) : 1'000'000;
  const auto root = fs::temp_directory_path() / fmt::format("fwlab-bench-harness-{}", getpid());
  fs::create_directories(root);
  const auto worker = (root / "trivial_worker.sh").string();
  {
    std::ofstream w(worker);
    w << "#!/bin/sh\n"
         "echo '{\"type\":\"start\",\"seq\":0}' >> \"$2/events.jsonl\"\n"
         "echo '{\"type\":\"end\",\"seq\":1,\"status\":\"finished\"}' >> \"$2/events.jsonl\"\n"
         "echo '{\"status\":\"finished\",\"exit_code\":0}' > \"$2/status.json\"\n";
  }
  fs::permissions(worker, fs::perms::owner_all);

  // (1a) The worker alone, started and awaited n times.
  fs::create_directories(root / "direct");
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n_jobs; ++i) {
    boost::process::child c(worker, "run", (root / "direct").string());
    c.wait();
  }
  const double direct = seconds_since(t0);

  // (1b) The same through the orchestrator: plan, register, claim, launch, poll, ingest, record.
  const auto toml = (root / "bench.toml").string();
  {
    std::ofstream f(toml);
    f << "[experiment]\nname = \"bench\"\n[stage.run]\nmixer = \"softmax\"\n[grid]\nseed = [";
    for (int i = 0; i < n_jobs; ++i) f << (i ? ", " : "") << i;
    f << "]\n";
  }
  t0 = std::chrono::steady_clock::now();
  auto ex = load_experiment(toml, "");
  auto jobs = plan_jobs(ex, FWLAB_SOURCE_DIR, "bench");
  Db db((root / "fwlab.db").string());
  Store store(db);
  SweepOptions opt;
  opt.runs_dir = (root / "runs").string();
  fs::create_directories(opt.runs_dir);
  store.register_jobs(1, jobs, ex.name, "", opt.runs_dir);
  LocalLauncher pool(LocalSettings{worker, 1, 0});
  Scheduler scheduler(store, pool, 1, jobs, opt);
  auto summary = drive(scheduler, {});
  const double swept = seconds_since(t0);

  // (2) Ingestion of n_rows metric rows written as the worker writes them.
  const auto job_dir = root / "ingest";
  fs::create_directories(job_dir);
  {
    std::ofstream ev(job_dir / "events.jsonl");
    for (int64_t i = 0; i < n_rows; ++i)
      ev << fmt::format(
          "{{\"key\":\"train_loss\",\"seq\":{},\"step\":{},\"time\":1795240540.0226445,\"type\":\"metric\",\"value\":{}"
          "}}\n",
          i, i, 2.0 + 1.0 / static_cast<double>(i + 1));
  }
  db.exec("INSERT INTO jobs(id, status) VALUES('ingest-bench', 'running')");
  t0 = std::chrono::steady_clock::now();
  const auto added = ingest_events(db, "ingest-bench", job_dir.string());
  const double ingest = seconds_since(t0);
  const auto again = ingest_events(db, "ingest-bench", job_dir.string());

  fmt::print("dispatch: {} jobs of a trivial worker, 1 at a time ({} finished)\n", n_jobs, summary.finished);
  fmt::print("  worker started directly : {:8.2f} ms/job\n", 1000 * direct / n_jobs);
  fmt::print("  through fwlab's pool    : {:8.2f} ms/job\n", 1000 * swept / n_jobs);
  fmt::print("  orchestrator overhead   : {:8.2f} ms/job (target < 20)\n", 1000 * (swept - direct) / n_jobs);
  fmt::print("ingest: {} metric rows in {:.2f} s = {:.0f} rows/s (target >= 200000); re-ingest added {}\n", added,
             ingest, static_cast<double>(added) / ingest, again);
  fs::remove_all(root);
  return 0;
}

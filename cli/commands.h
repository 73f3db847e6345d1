// The `fwlab` commands that live in files of their own (main.cpp keeps the sweep, the analysis commands and the
// argument parsing). Each returns fwlab's exit code.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/common.h"
#include "harness/db.h"

namespace fwlab::cli {

struct SweepArgs {
  std::string file, profile, runs, worker, executor;
  int jobs = 1, threads = 0, retries = 1;
  double timeout = 0;
  bool dry_run = false, retry_failed = false, retry_diverged = false, detach = false;
};
int cmd_sweep(const SweepArgs& a, const Common& c);
int cmd_table(const std::string& file, const std::string& profile, const std::string& format, bool compare,
              const std::string& out, const std::string& table_name, const Common& c);
int cmd_report(const std::string& file, const std::string& profile, const std::string& out, const Common& c);
// list: only the names of the figures the file's jobs make once all have run (no database, nothing drawn).
int cmd_plot(const std::string& file, const std::string& profile, const std::string& out, const std::string& gnuplot,
             bool list, const Common& c);
int cmd_status(const std::string& file, const std::string& profile, const Common& c);
// Cluster sweeps still open: reconciled, ingested, their next waves submitted (`wait`: until all have ended).
int cmd_sync(const Common& c, bool wait, bool quiet);
int cmd_query(const std::string& sql, const std::string& format, const Common& c);
// `curve`: print (or, with `out`, write) one whole series as CSV instead of the job's summary.
int cmd_show(const std::string& prefix, const std::string& curve, const std::string& out, const Common& c);
int cmd_diff(const std::string& first, const std::string& second, const Common& c);
// Corpus BLEU of HYP against REF, both ways (contract/evaluation/bleu.h); `format`: text or json.
int cmd_bleu(const std::string& hypotheses, const std::string& references, const std::string& format);

struct SiteOptions {
  std::string out;                 // site: the folder
  std::vector<std::string> files;  // experiment files (default: the catalog, experiments/*.toml)
  std::string gnuplot = "gnuplot";
  std::string bind = "127.0.0.1";  // serve
  int port = 8765;                 // serve; 0: any free port (printed)
};
int cmd_site(const SiteOptions& o, const Common& c);
int cmd_export(const std::string& format, const std::string& out, const Common& c);
int cmd_serve(const SiteOptions& o, const Common& c);

// The jobs row whose id is `prefix` or starts with it; ArgumentError naming `command` when none or several match.
nlohmann::json find_job(Db& db, const std::string& prefix, const std::string& command);

}  // namespace fwlab::cli

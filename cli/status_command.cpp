// `fwlab status [FILE]`: counts by status and an ETA per experiment; with a file, the cells its profile and
// --set make, as a sweep of the same command line would run them.
#include <fmt/format.h>

#include <filesystem>
#include <map>

#include "cli/commands.h"
#include "cli/planning.h"
#include "contract/job/job_status.h"
#include "harness/slurm_launcher.h"
#include "harness/store.h"

namespace fwlab::cli {

namespace {

struct Counts {
  std::map<std::string, int64_t> by_status;
  double mean_s = -1;  // mean time of a finished or diverged job; < 0: none yet
};

void print_counts(const std::string& name, const std::string& profile, const Counts& c) {
  int64_t total = 0, left = 0;
  std::string parts;
  for (const auto& [st, n] : c.by_status) {
    total += n;
    const auto status = parse_job_status(st);
    if (st == "new" ||
        (status && (*status == JobStatus::pending || is_active(*status) || *status == JobStatus::interrupted)))
      left += n;
    parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", n, st);
  }
  const std::string eta = left == 0       ? "done"
                          : c.mean_s >= 0 ? fmt::format("ETA ~{:.0f} s (serial)", c.mean_s * static_cast<double>(left))
                                          : "ETA unknown";
  fmt::print("{} [{}]: {} cells: {}; {}\n", name, profile.empty() ? "no profile" : profile, total, parts, eta);
}

// The cells of the file as planned now: a job the database has never seen is "new".
int status_of_plan(Db& db, const PlannedExperiment& plan, const std::string& profile) {
  Counts counts;
  double seconds = 0;
  int64_t timed = 0;
  auto q = db.prepare("SELECT status, finished - started FROM jobs WHERE id = ?");
  for (const auto& j : plan.jobs) {
    if (!j.applicable) {
      ++counts.by_status["n/a"];
      continue;
    }
    q.reset();
    q.bind(1, j.id);
    const bool known = q.step();
    const auto status = known ? q.text(0) : std::string("new");
    ++counts.by_status[status];
    if (known && (status == "finished" || status == "diverged") && !q.is_null(1)) seconds += q.real(1), ++timed;
  }
  if (timed) counts.mean_s = seconds / static_cast<double>(timed);
  print_counts(plan.ex.name, profile, counts);
  return 0;
}

// Every experiment and profile the database has cells of.
int status_of_database(Db& db) {
  auto q =
      db.prepare(fmt::format("SELECT c.experiment, c.profile, COALESCE(j.status, 'n/a'), COUNT(*), "
                             "AVG(CASE WHEN j.status IN ({}) THEN j.finished - j.started END) "
                             "FROM cells c LEFT JOIN jobs j ON j.id = c.job_id GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
                             sql_list({JobStatus::finished, JobStatus::diverged})));
  std::map<std::pair<std::string, std::string>, Counts> all;
  while (q.step()) {
    auto& c = all[{q.text(0), q.text(1)}];
    c.by_status[q.text(2)] = q.integer(3);
    if (!q.is_null(4)) c.mean_s = q.real(4);
  }
  if (all.empty()) fmt::print("no sweeps\n");
  for (const auto& [key, counts] : all) print_counts(key.first, key.second, counts);
  return 0;
}

}  // namespace

int cmd_status(const std::string& file, const std::string& profile, const Common& c) {
  check_db_path(c.db_path, false);  // no database yet: DbOpenError, exit 2, before anything is made
  std::optional<PlannedExperiment> plan;
  if (!file.empty()) plan = plan_checked(file, profile, c, false);
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
  return plan ? status_of_plan(db, *plan, profile) : status_of_database(db);
}

}  // namespace fwlab::cli

#include "harness/store.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "contract/job/events.h"
#include "harness/ingest.h"

namespace fwlab {

namespace fs = std::filesystem;

std::string host_name() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return host;
}

bool pid_alive(int64_t pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

namespace {

std::string name_of(JobStatus s) { return std::string(to_string(s)); }

constexpr const char* kRowColumns =
    "id, status, COALESCE(owner_pid, 0), COALESCE(owner_host, ''), COALESCE(launcher, ''), COALESCE(batch_id, ''), "
    "COALESCE(submit_token, ''), COALESCE(dir, ''), attempts, retries_used";

JobRow row_of(Statement& q) {
  JobRow r;
  r.id = q.text(0);
  r.status = parse_job_status(q.text(1)).value_or(JobStatus::pending);
  r.owner_pid = q.integer(2);
  r.owner_host = q.text(3);
  r.launcher = q.text(4);
  r.batch_id = q.text(5);
  r.submit_token = q.text(6);
  r.dir = q.text(7);
  r.attempts = q.integer(8);
  r.retries_used = q.integer(9);
  return r;
}

}  // namespace

void Store::register_jobs(int64_t sweep_id, const std::vector<PlannedJob>& jobs, const std::string& experiment,
                          const std::string& profile, const std::string& runs_dir) {
  // Absolute, so that the row names the folder wherever the database is read from.
  const auto runs = fs::absolute(runs_dir).lexically_normal();
  const auto dir_of = [&](const std::string& id) { return (runs / id).string(); };
  db_.transaction([&] {
    auto cell = db_.prepare(
        "INSERT OR REPLACE INTO cells(experiment, profile, stage, coords, job_id, applicable) VALUES(?,?,?,?,?,?)");
    auto job = db_.prepare(
        "INSERT OR IGNORE INTO jobs(id, experiment, stage, coords, config, depends_on, status, created, dir, params, "
        "state_elements, timeout_s) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)");
    auto link = db_.prepare("INSERT OR IGNORE INTO sweep_jobs(sweep_id, job_id) VALUES(?,?)");
    // A derived setting's record (harness/derive.h), a row per cell: two cells whose selectors chose the same layers
    // share a job, each with its own derivation.
    auto derived = db_.prepare(
        "INSERT OR IGNORE INTO derivations(job_id, experiment, stage, coords, key, value, record, created) "
        "VALUES(?,?,?,?,?,?,?,?)");
    for (const auto& j : jobs) {
      cell.bind(1, experiment).bind(2, profile).bind(3, j.stage).bind(4, j.coords.dump());
      if (j.applicable)
        cell.bind(5, j.id);
      else
        cell.bind_null(5);
      cell.bind(6, static_cast<int64_t>(j.applicable));
      cell.run();
      if (!j.applicable) continue;
      job.bind(1, j.id)
          .bind(2, experiment)
          .bind(3, j.stage)
          .bind(4, j.coords.dump())
          .bind(5, j.spec.dump())
          .bind(6, j.depends_on)
          .bind(7, name_of(JobStatus::pending))
          .bind(8, unix_time())
          .bind(9, dir_of(j.id))
          .bind(10, j.params)
          .bind(11, j.state.elements_at(j.context))
          .bind(12, j.timeout_s);
      job.run();
      link.bind(1, sweep_id).bind(2, j.id);
      link.run();
      if (j.derivation.is_null()) continue;
      derived.bind(1, j.id)
          .bind(2, experiment)
          .bind(3, j.stage)
          .bind(4, j.coords.dump())
          .bind(5, j.derivation.value("key", std::string()))
          .bind(6, j.derivation.value("value", nlohmann::json()).dump())
          .bind(7, j.derivation.dump())
          .bind(8, unix_time());
      derived.run();
    }
  });
}

std::optional<JobRow> Store::job(const std::string& id) {
  auto q = db_.prepare(fmt::format("SELECT {} FROM jobs WHERE id = ?", kRowColumns));
  q.bind(1, id);
  if (!q.step()) return std::nullopt;
  return row_of(q);
}

std::vector<PlannedJob> Store::sweep_jobs(int64_t sweep_id) {
  std::vector<PlannedJob> out;
  auto q = db_.prepare(
      "SELECT j.id, j.stage, j.coords, j.config, COALESCE(j.depends_on, ''), COALESCE(j.timeout_s, 0), "
      "COALESCE(j.params, 0) "
      "FROM jobs j JOIN sweep_jobs s ON s.job_id = j.id WHERE s.sweep_id = ? ORDER BY j.rowid");
  q.bind(1, sweep_id);
  while (q.step()) {
    PlannedJob j;
    j.id = q.text(0);
    j.stage = q.text(1);
    j.coords = nlohmann::json::parse(q.text(2), nullptr, false);
    j.spec = nlohmann::json::parse(q.text(3), nullptr, false);
    j.depends_on = q.text(4);
    j.timeout_s = q.real(5);
    j.params = q.integer(6);
    out.push_back(std::move(j));
  }
  return out;
}

void Store::set_outcome(const std::string& id, const Outcome& o) {
  auto u = db_.prepare(
      "UPDATE jobs SET status = ?, cause = ?, reason = ?, exit_code = ?, finished = ?, owner_pid = NULL WHERE id = ?");
  u.bind(1, name_of(o.status)).bind(2, o.cause).bind(3, o.reason).bind(4, o.exit_code).bind(5, unix_time()).bind(6, id);
  u.run();
}

void Store::set_adopted(const std::string& id, const Outcome& o, double started, double finished) {
  auto u = db_.prepare(
      "UPDATE jobs SET status = ?, cause = ?, reason = ?, exit_code = ?, started = ?, finished = ?, attempts = 1, "
      "owner_pid = NULL WHERE id = ?");
  u.bind(1, name_of(o.status)).bind(2, o.cause).bind(3, o.reason).bind(4, o.exit_code).bind(5, started);
  u.bind(6, finished).bind(7, id);
  u.run();
}

void Store::retry(const std::string& id, const Outcome& why) {
  auto u = db_.prepare(
      "UPDATE jobs SET status = ?, cause = ?, reason = ?, exit_code = ?, owner_pid = NULL, "
      "retries_used = retries_used + 1 WHERE id = ?");
  u.bind(1, name_of(JobStatus::pending)).bind(2, why.cause).bind(3, why.reason).bind(4, why.exit_code).bind(5, id);
  u.run();
}

void Store::start_over(const std::string& id, const std::string& runs_dir) {
  const auto row = job(id);
  const auto dir = fs::path(runs_dir) / id;
  if (row && fs::exists(dir)) {
    fs::rename(dir, fs::path(runs_dir) / fmt::format("{}.attempt-{}", id, row->attempts));
    forget_record(db_, id);
  }
  set_outcome(id, {JobStatus::pending, nullptr, nullptr, nullptr});
}

bool Store::claim(const std::string& id, const std::string& launcher, int64_t pid, const std::string& host) {
  bool ok = false;
  db_.transaction([&] {
    const auto row = job(id);
    if (!row || is_result(row->status)) return;
    if (is_active(row->status) && row->launcher != "local" && !row->launcher.empty()) return;  // on a cluster
    if (row->status == JobStatus::running && row->owner_pid != pid && row->owner_host == host &&
        pid_alive(row->owner_pid))
      return;
    ok = true;
    if (launcher != "local") return;
    auto u = db_.prepare("UPDATE jobs SET status = ?, owner_pid = ?, owner_host = ?, launcher = 'local' WHERE id = ?");
    u.bind(1, name_of(JobStatus::running)).bind(2, pid).bind(3, host).bind(4, id);
    u.run();
  });
  return ok;
}

void Store::mark_started_local(const std::string& id, int64_t pid, const std::string& host) {
  auto u = db_.prepare(
      "UPDATE jobs SET status = ?, owner_pid = ?, owner_host = ?, launcher = 'local', started = ?, "
      "attempts = attempts + 1 WHERE id = ?");
  u.bind(1, name_of(JobStatus::running)).bind(2, pid).bind(3, host).bind(4, unix_time()).bind(5, id);
  u.run();
}

void Store::mark_submitted(const std::vector<std::string>& ids, const std::string& token, int64_t sweep_id,
                           const std::string& launcher, const std::string& script) {
  db_.transaction([&] {
    auto wave = db_.prepare("INSERT INTO waves(token, sweep_id, launcher, submitted, script) VALUES(?,?,?,?,?)");
    wave.bind(1, token).bind(2, sweep_id).bind(3, launcher).bind(4, unix_time()).bind(5, script);
    wave.run();
    auto u = db_.prepare(
        "UPDATE jobs SET status = ?, launcher = ?, submit_token = ?, batch_id = NULL, owner_pid = NULL, "
        "started = ?, attempts = attempts + 1 WHERE id = ?");
    for (const auto& id : ids) {
      u.bind(1, name_of(JobStatus::submitted)).bind(2, launcher).bind(3, token).bind(4, unix_time()).bind(5, id);
      u.run();
    }
  });
}

void Store::record_batch_ids(const std::string& token, const std::string& array_id,
                             const std::vector<std::string>& batch_ids) {
  db_.transaction([&] {
    auto w = db_.prepare("UPDATE waves SET batch_id = ? WHERE token = ?");
    w.bind(1, array_id).bind(2, token);
    w.run();
    // The wave's jobs in the order of its list file: task i is the i-th job submitted under the token.
    auto ids = db_.prepare("SELECT id FROM jobs WHERE submit_token = ? ORDER BY id");
    ids.bind(1, token);
    std::vector<std::string> jobs;
    while (ids.step()) jobs.push_back(ids.text(0));
    auto u = db_.prepare("UPDATE jobs SET batch_id = ? WHERE id = ? AND submit_token = ?");
    for (size_t i = 0; i < jobs.size() && i < batch_ids.size(); ++i) {
      u.bind(1, batch_ids[i]).bind(2, jobs[i]).bind(3, token);
      u.run();
    }
  });
}

void Store::mark_running(const std::string& id) {
  auto u = db_.prepare("UPDATE jobs SET status = ? WHERE id = ? AND status = ?");
  u.bind(1, name_of(JobStatus::running)).bind(2, id).bind(3, name_of(JobStatus::submitted));
  u.run();
}

std::vector<JobRow> Store::in_flight(const std::string& launcher) {
  auto q = db_.prepare(fmt::format("SELECT {} FROM jobs WHERE launcher = ? AND status IN ({})", kRowColumns,
                                   sql_list({JobStatus::submitted, JobStatus::running})));
  q.bind(1, launcher);
  std::vector<JobRow> out;
  while (q.step()) out.push_back(row_of(q));
  return out;
}

std::vector<std::string> Store::unanswered_waves(const std::string& launcher) {
  auto q = db_.prepare("SELECT token FROM waves WHERE launcher = ? AND batch_id IS NULL");
  q.bind(1, launcher);
  std::vector<std::string> out;
  while (q.step()) out.push_back(q.text(0));
  return out;
}

void Store::forget_wave(const std::string& token) {
  db_.transaction([&] {
    auto u =
        db_.prepare(fmt::format("UPDATE jobs SET status = ?, submit_token = NULL, attempts = MAX(attempts - 1, 0) "
                                "WHERE submit_token = ? AND status IN ({})",
                                sql_list({JobStatus::submitted, JobStatus::running})));
    u.bind(1, name_of(JobStatus::pending)).bind(2, token);
    u.run();
    auto d = db_.prepare("DELETE FROM waves WHERE token = ?");
    d.bind(1, token);
    d.run();
  });
}

int64_t Store::mark_orphans_interrupted() {
  const std::string host = host_name();
  int64_t marked = 0;
  db_.transaction([&] {
    // Rows (id, owner pid) of `sql` whose owner is no longer alive on this host.
    auto dead = [&](const std::string& sql) {
      std::vector<nlohmann::json> ids;
      auto q = db_.prepare(sql);
      q.bind(1, host);
      while (q.step())
        if (!pid_alive(q.integer(1))) ids.push_back(q.value(0));
      return ids;
    };
    const auto running = name_of(JobStatus::running), interrupted = name_of(JobStatus::interrupted);
    const std::string sweep_running(to_string(SweepStatus::running)),
        sweep_interrupted(to_string(SweepStatus::interrupted));
    auto sweep = db_.prepare("UPDATE sweeps SET status = ?, finished = ? WHERE id = ? AND status = ?");
    for (const auto& id :
         dead(fmt::format("SELECT id, pid FROM sweeps WHERE status = '{}' AND host = ? AND pid IS NOT NULL "
                          "AND COALESCE(json_extract(executor, '$.kind'), 'local') = 'local'",
                          sweep_running))) {
      sweep.bind(1, sweep_interrupted).bind(2, unix_time()).bind(3, id).bind(4, sweep_running);
      sweep.run();
      ++marked;
    }
    auto job = db_.prepare(
        "UPDATE jobs SET status = ?, cause = 'orchestrator_died', reason = 'its orchestrator is gone', "
        "owner_pid = NULL WHERE id = ? AND status = ?");
    for (const auto& id : dead(fmt::format(
             "SELECT id, owner_pid FROM jobs WHERE status = '{}' AND owner_host = ? AND owner_pid IS NOT NULL",
             running))) {
      job.bind(1, interrupted).bind(2, id).bind(3, running);
      job.run();
      ++marked;
    }
  });
  return marked;
}

int64_t Store::open_sweep(const SweepRecord& sweep) {
  auto ins = db_.prepare(
      "INSERT INTO sweeps(experiment, file, profile, command, host, pid, started, status, executor, options) "
      "VALUES(?,?,?,?,?,?,?,?,?,?)");
  ins.bind(1, sweep.experiment)
      .bind(2, sweep.file)
      .bind(3, sweep.profile)
      .bind(4, sweep.command)
      .bind(5, sweep.host)
      .bind(6, sweep.pid)
      .bind(7, unix_time())
      .bind(8, std::string(to_string(SweepStatus::running)))
      .bind(9, sweep.executor.dump())
      .bind(10, sweep.options.dump());
  ins.run();
  return sqlite3_last_insert_rowid(db_.handle());
}

void Store::close_sweep(int64_t sweep_id, SweepStatus status) {
  auto upd = db_.prepare("UPDATE sweeps SET finished = ?, status = ? WHERE id = ?");
  upd.bind(1, unix_time()).bind(2, std::string(to_string(status))).bind(3, sweep_id);
  upd.run();
}

bool Store::sweep_has_unsuccessful_jobs(int64_t sweep_id) {
  auto q =
      db_.prepare(fmt::format("SELECT COUNT(*) FROM jobs j JOIN sweep_jobs s ON s.job_id = j.id WHERE s.sweep_id = ? "
                              "AND j.status IN ({})",
                              sql_list({JobStatus::failed, JobStatus::crashed, JobStatus::timeout, JobStatus::blocked,
                                        JobStatus::cancelled, JobStatus::interrupted})));
  q.bind(1, sweep_id);
  return q.step() && q.integer(0) > 0;
}

std::vector<OpenSweep> Store::open_cluster_sweeps() {
  std::vector<OpenSweep> open;
  auto q = db_.prepare(
      "SELECT id, experiment, executor, options FROM sweeps WHERE status = ? AND "
      "json_extract(executor, '$.kind') = 'slurm' ORDER BY id");
  q.bind(1, std::string(to_string(SweepStatus::running)));
  while (q.step())
    open.push_back({q.integer(0), q.text(1), nlohmann::json::parse(q.text(2), nullptr, false),
                    nlohmann::json::parse(q.text(3), nullptr, false)});
  return open;
}

}  // namespace fwlab

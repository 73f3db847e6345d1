#include "analysis/mlflow_export.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "contract/job/events.h"
#include "harness/plan.h"

namespace fwlab {

namespace fs = std::filesystem;

namespace {

// A YAML scalar in single quotes ('' inside), as MLflow's own files write strings.
std::string yaml(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

int64_t ms(double unix_seconds) { return static_cast<int64_t>(std::llround(unix_seconds * 1000.0)); }

// MLflow's RunStatus numbers: RUNNING 1, SCHEDULED 2, FINISHED 3, FAILED 4, KILLED 5. A diverged run ran to its
// end with a result fwlab keeps: FINISHED, with fwlab.status saying "diverged".
int run_status(const std::string& s) {
  if (s == "finished" || s == "diverged") return 3;
  if (s == "running") return 1;
  if (s == "pending" || s == "submitted") return 2;
  if (s == "interrupted" || s == "cancelled") return 5;
  return 4;
}

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  write_file_atomic(path.string(), text);
}

// MLflow names a file after each key: a key must stay one file name.
std::string file_key(std::string key) {
  for (auto& c : key)
    if (c == '/' || c == '\0') c = '_';
  return key;
}

void write_metrics(Db& db, const std::string& id, const fs::path& run) {
  std::map<std::string, std::string> lines;
  auto m = db.prepare(
      "SELECT key, step, value, time FROM metrics WHERE job_id = ? AND value IS NOT NULL ORDER BY key, step");
  m.bind(1, id);
  while (m.step()) lines[m.text(0)] += fmt::format("{} {} {}\n", ms(m.real(3)), m.real(2), m.integer(1));
  auto e =
      db.prepare("SELECT split, step, time, loss, ppl, bpc, accuracy FROM evals WHERE job_id = ? ORDER BY split, step");
  e.bind(1, id);
  const char* fields[] = {"loss", "ppl", "bpc", "accuracy"};
  while (e.step())
    for (int f = 0; f < 4; ++f)
      if (!e.is_null(3 + f))
        lines[e.text(0) + "_" + fields[f]] +=
            fmt::format("{} {} {}\n", ms(e.is_null(2) ? 0.0 : e.real(2)), e.real(3 + f), e.integer(1));
  for (const auto& [key, text] : lines) write(run / "metrics" / file_key(key), text);
}

void write_run(Db& db, Statement& job, const std::string& experiment_id, const fs::path& store) {
  const auto id = job.text(0), status = job.text(2);
  const auto run = store / experiment_id / id;
  const auto coords = nlohmann::json::parse(job.text(1).empty() ? "{}" : job.text(1), nullptr, false);
  const auto name = fmt::format("{} {}", job.text(5), coords.is_object() ? coords_label(coords) : job.text(1));
  write(run / "meta.yaml",
        fmt::format("artifact_uri: {}\nend_time: {}\nentry_point_name: ''\nexperiment_id: {}\nlifecycle_stage: "
                    "active\nrun_id: {}\n"
                    "run_name: {}\nrun_uuid: {}\nsource_name: ''\nsource_type: 4\nsource_version: ''\nstart_time: "
                    "{}\nstatus: {}\ntags: []\n"
                    "user_id: fwlab\n",
                    yaml("file://" + (fs::absolute(run) / "artifacts").string()),
                    job.is_null(4) ? "null" : std::to_string(ms(job.real(4))), yaml(experiment_id), id, yaml(name), id,
                    job.is_null(3) ? "null" : std::to_string(ms(job.real(3))), run_status(status)));
  fs::create_directories(run / "artifacts");
  auto p = db.prepare("SELECT key, value FROM params WHERE job_id = ?");
  p.bind(1, id);
  while (p.step())
    write(run / "params" / file_key(p.text(0)), p.is_null(1)             ? ""
                                                : p.value(1).is_string() ? p.text(1)
                                                                         : p.value(1).dump());
  for (const auto& [key, value] : std::map<std::string, std::string>{
           {"mlflow.runName", name}, {"fwlab.stage", job.text(5)}, {"fwlab.status", status}, {"fwlab.job_id", id}})
    write(run / "tags" / key, value);
  write_metrics(db, id, run);
}

}  // namespace

ExportSummary export_mlflow(Db& db, const std::string& out_dir) {
  const fs::path store(out_dir);
  ExportSummary summary;
  const auto now = ms(unix_time());
  auto experiment_meta = [&](const std::string& id, const std::string& name) {
    write(store / id / "meta.yaml",
          fmt::format("artifact_location: {}\ncreation_time: {}\nexperiment_id: {}\nlast_update_time: {}\n"
                      "lifecycle_stage: active\nname: {}\n",
                      yaml("file://" + fs::absolute(store / id).string()), now, yaml(id), now, yaml(name)));
  };
  experiment_meta("0", "Default");
  auto names = db.prepare("SELECT DISTINCT experiment FROM cells ORDER BY experiment");
  auto jobs = db.prepare(
      "SELECT DISTINCT j.id, j.coords, j.status, j.started, j.finished, j.stage FROM cells c JOIN jobs j ON j.id = "
      "c.job_id "
      "WHERE c.experiment = ? ORDER BY j.id");
  while (names.step()) {
    const auto id = std::to_string(++summary.experiments);
    experiment_meta(id, names.text(0));
    jobs.reset();
    jobs.bind(1, names.text(0));
    while (jobs.step()) {
      write_run(db, jobs, id, store);
      ++summary.runs;
    }
  }
  return summary;
}

}  // namespace fwlab

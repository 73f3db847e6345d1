// `fwlab show JOB`: one job's row, curves, evaluations, divergence and log tail; `--curve KEY`: one whole series.
#include <fmt/format.h>

#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "contract/job/did_you_mean.h"
#include "harness/plan.h"

namespace fwlab::cli {

namespace fs = std::filesystem;

namespace {

// A value as a person reads it: text as it is, "–" for none, numbers to 6 significant digits.
std::string str(const nlohmann::json& v) {
  if (v.is_null()) return "–";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return fmt::format("{:.6g}", v.get<double>());
  return v.dump();
}

void print_row(const nlohmann::json& j) {
  fmt::print(
      "job {}\n  experiment {}  stage {}  cell {}\n  status {}  cause {}  attempts {}  exit code {}\n  reason {}\n"
      "  params {}  state elements {}  host {}\n  dir {}\n",
      str(j["id"]), str(j["experiment"]), str(j["stage"]), coords_label(nlohmann::json::parse(str(j["coords"]))),
      str(j["status"]), str(j["cause"]), str(j["attempts"]), str(j["exit_code"]), str(j["reason"]), str(j["params"]),
      str(j["state_elements"]), str(j["host"]), str(j["dir"]));
  if (!j["depends_on"].is_null() && !str(j["depends_on"]).empty())
    fmt::print("  starts from {} (the best checkpoint of that job)\n", str(j["depends_on"]));
  fmt::print("  config {}\n", str(j["config"]));
}

void print_curves(Db& db, const std::string& id) {
  auto m = db.prepare(
      "SELECT key, COUNT(*), MIN(step), MAX(step), "
      "(SELECT value FROM metrics f WHERE f.job_id = m.job_id AND f.key = m.key ORDER BY step LIMIT 1), "
      "(SELECT value FROM metrics l WHERE l.job_id = m.job_id AND l.key = m.key ORDER BY step DESC LIMIT 1) "
      "FROM metrics m WHERE job_id = ? GROUP BY key ORDER BY key");
  m.bind(1, id);
  fmt::print("curves (`fwlab show {} --curve KEY` prints one whole):\n", id.substr(0, 8));
  while (m.step())
    fmt::print("  {:<16} {} points, steps {}..{}: {} -> {}\n", m.text(0), m.integer(1), m.integer(2), m.integer(3),
               str(m.value(4)), str(m.value(5)));
}

void print_evals_and_divergence(Db& db, const std::string& id) {
  auto e = db.prepare(
      "SELECT split, step, checkpoint, loss, ppl, bpc, accuracy FROM evals WHERE job_id = ? ORDER BY split DESC, step");
  e.bind(1, id);
  fmt::print("evaluations:\n");
  while (e.step())
    fmt::print("  {:<5} step {:>6} {:<4} loss {} ppl {} bpc {} acc {}\n", e.text(0), e.integer(1), e.text(2),
               str(e.value(3)), str(e.value(4)), str(e.value(5)), str(e.value(6)));
  auto d = db.prepare(
      "SELECT step, cause, value, last_finite_loss, lr, first_nonfinite_layer, state_layer FROM divergences WHERE "
      "job_id = ?");
  d.bind(1, id);
  while (d.step())
    fmt::print("divergence: step {} cause {} value {} last finite loss {} lr {} layer {}\n", d.integer(0), d.text(1),
               d.text(2), str(d.value(3)), str(d.value(4)), d.is_null(5) ? d.text(6) : d.text(5));
}

void print_log_tail(const std::string& dir) {
  std::ifstream log(fs::path(dir) / "worker.log");
  std::deque<std::string> tail;
  std::string line;
  while (std::getline(log, line)) {
    tail.push_back(line);
    if (tail.size() > 10) tail.pop_front();
  }
  fmt::print("log tail:\n");
  for (const auto& l : tail) fmt::print("  | {}\n", l);
}

// Every key a curve can be asked by: the metrics' keys, and SPLIT.FIELD for the evaluations.
std::vector<std::string> curve_keys(Db& db, const std::string& id) {
  std::vector<std::string> keys;
  auto m = db.prepare("SELECT DISTINCT key FROM metrics WHERE job_id = ? ORDER BY key");
  m.bind(1, id);
  while (m.step()) keys.push_back(m.text(0));
  auto e = db.prepare("SELECT DISTINCT split FROM evals WHERE job_id = ? ORDER BY split");
  e.bind(1, id);
  while (e.step())
    for (const char* field : {"loss", "ppl", "bpc", "accuracy"}) keys.push_back(e.text(0) + "." + field);
  return keys;
}

// The whole series as CSV (step,value; an empty value where it was not finite).
int print_curve(Db& db, const std::string& id, const std::string& key, const std::string& out) {
  const auto keys = curve_keys(db, id);
  if (std::find(keys.begin(), keys.end(), key) == keys.end())
    throw ArgumentError(fmt::format("show --curve {}: job {} has no such curve{} (it has: {})", key, id.substr(0, 8),
                                    did_you_mean(key, keys), fmt::join(keys, ", ")));
  // A metric's key wins; otherwise the key is SPLIT.FIELD of the evaluations (curve_keys made it so).
  auto metric = db.prepare("SELECT 1 FROM metrics WHERE job_id = ? AND key = ? LIMIT 1");
  metric.bind(1, id).bind(2, key);
  const bool eval = !metric.step();
  const auto dot = key.rfind('.');
  auto q = eval ? db.prepare(
                      fmt::format("SELECT step, {} FROM evals WHERE job_id = ? AND split = ? ORDER BY step, checkpoint",
                                  key.substr(dot + 1)))
                : db.prepare("SELECT step, value FROM metrics WHERE job_id = ? AND key = ? ORDER BY step");
  q.bind(1, id).bind(2, eval ? key.substr(0, dot) : key);
  std::string csv = "step," + key + "\n";
  while (q.step()) csv += fmt::format("{},{}\n", q.integer(0), q.is_null(1) ? "" : fmt::format("{}", q.real(1)));
  return emit(csv, out);
}

}  // namespace

nlohmann::json find_job(Db& db, const std::string& prefix, const std::string& command) {
  auto q = db.prepare(
      "SELECT id, experiment, stage, coords, status, cause, reason, attempts, exit_code, dir, config, params, "
      "state_elements, started, finished, host, depends_on FROM jobs WHERE id LIKE ? || '%'");
  q.bind(1, prefix);
  std::vector<nlohmann::json> found;
  while (q.step()) {
    nlohmann::json j;
    for (int i = 0; i < q.columns(); ++i) j[q.name(i)] = q.value(i);
    found.push_back(j);
  }
  if (found.empty()) throw ArgumentError(fmt::format("{} {}: no job with that id or prefix", command, prefix));
  if (found.size() > 1)
    throw ArgumentError(fmt::format("{} {}: ambiguous prefix, {} jobs match", command, prefix, found.size()));
  return found[0];
}

int cmd_show(const std::string& prefix, const std::string& curve, const std::string& out, const Common& c) {
  check_db_path(c.db_path, false);  // no database yet: DbOpenError, exit 2, before anything is made
  if (!out.empty() && curve.empty())
    throw ArgumentError("show --out: only with --curve KEY (the series is what it writes)");
  Db db(c.db_path, true);
  const auto j = find_job(db, prefix, "show");
  const auto id = str(j["id"]);
  if (!curve.empty()) return print_curve(db, id, curve, out);
  print_row(j);
  print_curves(db, id);
  print_evals_and_divergence(db, id);
  print_log_tail(str(j["dir"]));
  return 0;
}

}  // namespace fwlab::cli

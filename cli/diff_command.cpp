// `fwlab diff JOB JOB`: the settings (every leaf of the two configs) and the results (the runs view's columns)
// that differ between two jobs.
#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/commands.h"

namespace fwlab::cli {

namespace {

std::string shown(const nlohmann::json& v) {
  if (v.is_null()) return "-";
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// "/model/mixer/rule" -> "model.mixer.rule"; an array stays one value.
std::map<std::string, nlohmann::json> leaves(const nlohmann::json& config, const std::string& prefix = "") {
  std::map<std::string, nlohmann::json> out;
  if (!config.is_object()) {
    out[prefix] = config;
    return out;
  }
  for (const auto& [k, v] : config.items())
    for (auto& [key, value] : leaves(v, prefix.empty() ? k : prefix + "." + k)) out[key] = value;
  return out;
}

// The runs view's row of a job, without what always differs (ids, folders, times) or is shown as settings.
std::map<std::string, nlohmann::json> results_of(Db& db, const std::string& id) {
  static const std::set<std::string> kSkip = {"job_id",   "config",  "dir",    "created",     "started",
                                              "finished", "seconds", "coords", "experiments", "profiles"};
  auto q = db.prepare("SELECT * FROM runs WHERE job_id = ?");
  q.bind(1, id);
  std::map<std::string, nlohmann::json> out;
  if (q.step())
    for (int i = 0; i < q.columns(); ++i)
      if (!kSkip.count(q.name(i))) out[q.name(i)] = q.value(i);
  return out;
}

// The keys whose values differ (a key only one side has counts, shown "-" on the other), printed in three columns.
int print_differences(const std::string& title, const std::map<std::string, nlohmann::json>& a,
                      const std::map<std::string, nlohmann::json>& b) {
  std::set<std::string> keys;
  for (const auto& [k, v] : a) keys.insert(k);
  for (const auto& [k, v] : b) keys.insert(k);
  std::vector<std::array<std::string, 3>> rows;
  for (const auto& k : keys) {
    const auto va = a.count(k) ? a.at(k) : nlohmann::json(), vb = b.count(k) ? b.at(k) : nlohmann::json();
    if (va != vb) rows.push_back({k, shown(va), shown(vb)});
  }
  fmt::print("{}: {}\n", title, rows.empty() ? "the same" : fmt::format("{} differ", rows.size()));
  size_t width = 0;
  for (const auto& r : rows) width = std::max(width, r[0].size());
  for (const auto& r : rows) fmt::print("  {:<{}}  {:<24}  {}\n", r[0], width, r[1], r[2]);
  return static_cast<int>(rows.size());
}

}  // namespace

int cmd_diff(const std::string& first, const std::string& second, const Common& c) {
  check_db_path(c.db_path, false);  // no database yet: DbOpenError, exit 2, before anything is made
  Db db(c.db_path, true);
  const auto a = find_job(db, first, "diff"), b = find_job(db, second, "diff");
  const auto ida = a["id"].get<std::string>(), idb = b["id"].get<std::string>();
  fmt::print("diff {} {}\n", ida, idb);
  // A fine-tune's source: the job whose best checkpoint it started from.
  const auto parent = [](const nlohmann::json& row) {
    const auto& p = row["depends_on"];
    return p.is_string() && !p.get<std::string>().empty() ? p : nlohmann::json();
  };
  if (!parent(a).is_null() || !parent(b).is_null())
    fmt::print("starts from: {}  {}{}\n", shown(parent(a)), shown(parent(b)),
               parent(a) == parent(b) ? " (the same)" : "");
  auto config = [](const nlohmann::json& row) {
    return row["config"].is_string() ? nlohmann::json::parse(row["config"].get<std::string>())
                                     : nlohmann::json::object();
  };
  print_differences("settings", leaves(config(a)), leaves(config(b)));
  print_differences("results", results_of(db, ida), results_of(db, idb));
  return 0;
}

}  // namespace fwlab::cli

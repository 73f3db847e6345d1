#include "cli/planning.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <optional>

#include "harness/db.h"
#include "harness/override_check.h"

namespace fwlab::cli {

PlannedExperiment plan_checked(const std::string& file, const std::string& profile, const Common& c, bool strict) {
  PlannedExperiment out;
  out.ex = load_experiment(file, profile, c.sets);
  std::optional<Db> db;
  if (std::filesystem::exists(c.db_path)) db.emplace(c.db_path, true);
  const auto results = db ? job_results_in(*db) : nullptr;
  auto plan = plan_experiment(out.ex, FWLAB_SOURCE_DIR, kFwlabVersion, results.get(), strict);
  out.jobs = std::move(plan.jobs), out.waiting = std::move(plan.waiting);
  if (c.force || c.sets.empty()) return out;
  const auto idle = idle_overrides(file, profile, c.sets, out.jobs, FWLAB_SOURCE_DIR, kFwlabVersion);
  if (!idle.empty()) throw ArgumentError(fmt::format("{}\n(--force runs it anyway)", fmt::join(idle, "\nfwlab: ")));
  return out;
}

}  // namespace fwlab::cli

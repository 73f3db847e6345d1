#include "harness/override_check.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <tuple>

#include "harness/experiment.h"

namespace fwlab {

namespace {

// What a plan is, for comparing two: each cell's stage, coordinates, applicability and job identity.
std::vector<std::tuple<std::string, std::string, bool, std::string>> plan_shape(const std::vector<PlannedJob>& jobs) {
  std::vector<std::tuple<std::string, std::string, bool, std::string>> out;
  for (const auto& j : jobs) out.emplace_back(j.stage, j.coords.dump(), j.applicable, j.id);
  return out;
}

// The job key a file-path --set lands on: defaults.X, stage.S.X or preset.A.V.X with X a job key or a short
// name; "" for the other sections (grid, table, executor, ...).
std::string job_key_of(const std::string& key) {
  const auto head = key.substr(0, key.find('.'));
  const size_t prefix_parts = head == "defaults" ? 1 : head == "stage" ? 2 : head == "preset" ? 3 : 0;
  size_t at = 0;
  for (size_t i = 0; i < prefix_parts && at != std::string::npos; ++i) at = key.find('.', i == 0 ? 0 : at + 1);
  if (prefix_parts == 0 || at == std::string::npos) return "";
  const auto rest = key.substr(at + 1);
  return key_aliases().count(rest) ? key_aliases().at(rest) : rest;
}

// ": it is shadowed by defaults.optim.lr (t.toml:12:6), which sets the same job key optim.lr; ...": the settings
// the jobs took instead (each once: a stage of its own may shadow it with another line), where any did.
std::string shadow_of(const std::string& set, const std::vector<PlannedJob>& planned) {
  const auto key = set.substr(0, set.find('='));
  const auto path = job_key_of(key);
  if (path.empty()) return "";
  std::vector<std::string> winners;
  for (const auto& j : planned) {
    if (!j.applicable) continue;
    const auto it = j.settings.find(path);
    if (it == j.settings.end() || it->second.pos.label == "--set " + set) continue;
    const auto winner = fmt::format("{} ({})", it->second.written_as, it->second.pos.str());
    if (std::find(winners.begin(), winners.end(), winner) == winners.end()) winners.push_back(winner);
  }
  if (winners.empty()) return "";
  return fmt::format(
      ": it is shadowed by {}, which set{} the same job key {}; set {}, or the job key itself (--set {}=...)",
      fmt::join(winners, " and "), winners.size() > 1 ? "" : "s", path, winners.size() > 1 ? "those" : "that one",
      path);
}

bool judged(const std::string& set) {
  const auto head = set.substr(0, set.find_first_of(".="));
  return head != "table" && head != "executor" && head != "experiment";
}

}  // namespace

std::vector<std::string> idle_overrides(const std::string& file, const std::string& profile,
                                        const std::vector<std::string>& sets, const std::vector<PlannedJob>& planned,
                                        const std::string& repo_root, const std::string& fwlab_version) {
  std::vector<std::string> out;
  const auto shape = plan_shape(planned);
  for (size_t i = 0; i < sets.size(); ++i) {
    if (!judged(sets[i])) continue;
    auto others = sets;
    others.erase(others.begin() + static_cast<long>(i));
    std::vector<PlannedJob> without;
    try {
      without = plan_jobs(load_experiment(file, profile, others), repo_root, fwlab_version);
    } catch (const ExperimentError&) {
      continue;  // the file needs this --set to plan at all: it does something
    }
    if (plan_shape(without) != shape) continue;
    const auto shadow = shadow_of(sets[i], planned);
    out.push_back(fmt::format("--set {}: changes no job{}", sets[i],
                              shadow.empty() ? ": every job already has that value" : shadow));
  }
  return out;
}

}  // namespace fwlab

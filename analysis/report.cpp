#include "analysis/report.h"
#include "analysis/report_throughput.h"

#include "analysis/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

namespace fwlab {

namespace {

void flatten(const nlohmann::json& v, const std::string& prefix, std::map<std::string, nlohmann::json>& out) {
  if (v.is_object() && !v.empty()) {
    for (const auto& [k, x] : v.items()) flatten(x, prefix.empty() ? k : prefix + "." + k, out);
    return;
  }
  out[prefix] = v;
}

std::string number(const std::optional<double>& v, const char* spec = "{:.4g}") {
  return v ? fmt::format(fmt::runtime(spec), *v) : "–";
}

std::string cell_name(const JobRecord& j) {
  const auto label = coords_label(j.planned.coords);
  return label == "-" ? fmt::format("stage {}", j.stage()) : label;
}

// Differences between two job configurations, key by key: "key: a → b".
std::vector<std::string> config_diff(const JobRecord& a, const JobRecord& b) {
  std::map<std::string, nlohmann::json> fa, fb;
  flatten(a.planned.spec, "", fa);
  flatten(b.planned.spec, "", fb);
  std::set<std::string> keys;
  for (const auto& [k, v] : fa) keys.insert(k);
  for (const auto& [k, v] : fb) keys.insert(k);
  std::vector<std::string> out;
  for (const auto& k : keys) {
    const auto va = fa.count(k) ? value_text(fa[k]) : "(unset)";
    const auto vb = fb.count(k) ? value_text(fb[k]) : "(unset)";
    if (va != vb) out.push_back(fmt::format("`{}`: {} here, {} there", k, va, vb));
  }
  return out;
}

size_t coords_distance(const JobRecord& a, const JobRecord& b) {
  size_t d = 0;
  for (const auto& [k, v] : a.planned.coords.items())
    if (!b.planned.coords.contains(k) || b.planned.coords.at(k) != v) ++d;
  return d;
}

// How many of the grid's axes, outermost first, the two jobs agree on before they first differ.
long shared_outer_axes(const Experiment& ex, const JobRecord& a, const JobRecord& b) {
  long n = 0;
  for (const auto& axis : ex.axes) {
    if (job_value(a, axis.name) != job_value(b, axis.name)) break;
    ++n;
  }
  return n;
}

std::string lr_text(double lr) { return fmt::format("{:g}", lr); }

// One line per run, however long the worker's reason.
std::string md_cell(const std::string& s) {
  const auto out = md_escape(s);
  return out.size() > 160 ? out.substr(0, 157) + "..." : out;
}

// "0.1 in dq": the largest error a kernel_fallback event recorded and where.
std::string error_text(const nlohmann::json& fallback) {
  const auto& e = fallback.contains("max_error") ? fallback["max_error"] : nlohmann::json();
  const auto where = md_cell(fallback.value("where", "?"));
  return e.is_number()   ? fmt::format("{:.3g} in {}", e.get<double>(), where)
         : e.is_string() ? e.get<std::string>() + " in " + where
                         : "–";
}

// The jobs in which a custom kernel failed its first-use check and the libtorch form ran instead
// (kernels/decay/kernel_guard.h): their numbers stand, but that kernel is wrong on that machine (`fwlab doctor` there).
std::string kernel_fallback_section(const std::vector<JobRecord>& jobs) {
  std::string rows;
  for (const auto& j : jobs)
    for (const auto& f : j.kernel_fallbacks)
      rows += fmt::format("| {} | {} | {} | {} | {} | {} |\n", cell_name(j), j.stage(), j.id(),
                          md_cell(f.value("kernel", "?")), md_cell(f.value("shape_class", "?")), error_text(f));
  if (rows.empty()) return "";
  return "## Kernel fallbacks\n\nJobs in which a custom kernel disagreed with libtorch's own form at its first use for "
         "a shape "
         "class; that class ran the libtorch form for the rest of the job, so the results stand. Run `fwlab doctor` on "
         "that "
         "machine.\n\n| cell | stage | job | kernel | shape class | error |\n| :--- | :--- | :--- | :--- | :--- | ---: "
         "|\n" +
         rows + "\n";
}

// The nearest sibling that converged: same stage, fewest differing grid coordinates, then fewest differing
// settings, then the one that differs in the innermost axes (a different seed or learning rate says more than a
// different rule); grid order breaks the remaining ties. Null when none of the stage converged.
const JobRecord* nearest_converged(const Experiment& ex, const std::vector<JobRecord>& jobs, const JobRecord& j) {
  const JobRecord* nearest = nullptr;
  std::tuple<size_t, size_t, long> best{};
  for (const auto& s : jobs) {
    if (!s.finished() || s.stage() != j.stage()) continue;
    const std::tuple<size_t, size_t, long> d{coords_distance(j, s), config_diff(j, s).size(),
                                             -shared_outer_axes(ex, j, s)};
    if (!nearest || d < best) nearest = &s, best = d;
  }
  return nearest;
}

// One diverged run: its divergence event as a table row, and how it differs from its nearest converged sibling.
std::string diverged_run(const Experiment& ex, const std::vector<JobRecord>& jobs, const JobRecord& j) {
  std::string out = fmt::format("### {} — stage {}, job {}\n\n", cell_name(j), j.stage(), j.id());
  out += "| step | cause | tripping value | last finite loss | first non-finite layer | lr at that step |\n";
  out += "| ---: | :--- | ---: | ---: | :--- | ---: |\n";
  if (j.divergence) {
    const auto& d = *j.divergence;
    const auto layer = !d.first_nonfinite_layer.empty() ? d.first_nonfinite_layer
                       : !d.state_layer.empty()         ? d.state_layer + " (state)"
                                                        : "–";
    out += fmt::format("| {} | {} | {} | {} | {} | {} |\n\n", d.step, d.cause, d.value.empty() ? "–" : d.value,
                       number(d.last_finite_loss), layer, number(d.lr, "{:.3g}"));
  } else {
    out += fmt::format("| – | {} | – | – | – | – |\n\n", j.cause.empty() ? "(no divergence event recorded)" : j.cause);
  }
  const JobRecord* nearest = nearest_converged(ex, jobs, j);
  if (!nearest) return out + "No run of this stage converged to compare with.\n\n";
  out += fmt::format("Nearest converged sibling: {} (job {}). Differences (this run, then the sibling):\n\n",
                     cell_name(*nearest), nearest->id());
  for (const auto& line : config_diff(j, *nearest)) out += fmt::format("- {}\n", line);
  return out + "\n";
}

std::string diverged_runs_section(const Experiment& ex, const std::vector<JobRecord>& jobs) {
  std::string out = "## Diverged runs\n\n";
  int diverged = 0;
  for (const auto& j : jobs)
    if (j.diverged()) out += diverged_run(ex, jobs, j), ++diverged;
  return diverged == 0 ? out + "None.\n\n" : out;
}

std::string stability_section(const ResultSet& results) {
  std::string stability;
  for (const auto& r : stability_by_setting(results))
    stability += fmt::format("| {} | {} | {} | {} | {:.0f}% |\n", r.setting, md_cell(r.value), r.runs, r.diverged,
                             100.0 * r.diverged / r.runs);
  const std::string out =
      "## Stability by setting\n\nRuns with a result (finished or diverged) and the share that diverged.\n\n";
  return out + (stability.empty()
                    ? "No setting varies among the runs with a result.\n\n"
                    : "| setting | value | runs | diverged | share |\n| :--- | :--- | ---: | ---: | ---: |\n" +
                          stability + "\n");
}

// Stability frontier: where an axis sweeps the learning rate, the largest one that converged in each cell.
std::string frontier_section(const Experiment& ex, const std::vector<JobRecord>& jobs) {
  const auto lr_axis = std::find_if(ex.axes.begin(), ex.axes.end(), [](const Axis& a) { return a.key == "optim.lr"; });
  if (lr_axis == ex.axes.end()) return "";
  std::string out = fmt::format(
      "## Stability frontier\n\nThe largest learning rate (axis `{}`) that converged in each cell, and the "
      "smallest that diverged.\n\n| stage | cell | converged | diverged | largest stable | smallest diverged |\n"
      "| :--- | :--- | :--- | :--- | ---: | ---: |\n",
      lr_axis->name);
  std::vector<std::string> order;
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> cells;
  std::map<std::string, std::string> stage_of;
  for (const auto& j : jobs) {
    if (!j.planned.coords.contains(lr_axis->name) || (!j.finished() && !j.diverged())) continue;
    auto coords = j.planned.coords;
    coords.erase(lr_axis->name);
    const auto key = j.stage() + "\t" + coords_label(coords);
    if (!cells.count(key)) order.push_back(key), stage_of[key] = j.stage();
    const double lr = job_value(j, lr_axis->name).get<double>();
    (j.finished() ? cells[key].first : cells[key].second).push_back(lr);
  }
  const auto list = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    std::vector<std::string> s;
    for (double x : v) s.push_back(lr_text(x));
    return s.empty() ? std::string("–") : fmt::format("{}", fmt::join(s, ", "));
  };
  for (const auto& key : order) {
    const auto& [ok, bad] = cells[key];
    out += fmt::format("| {} | {} | {} | {} | {} | {} |\n", stage_of[key], key.substr(key.find('\t') + 1), list(ok),
                       list(bad), ok.empty() ? "*" : lr_text(*std::max_element(ok.begin(), ok.end())),
                       bad.empty() ? "–" : lr_text(*std::min_element(bad.begin(), bad.end())));
  }
  return out + "\n`*`: no learning rate converged.\n\n";
}

std::string failures_section(const std::vector<JobRecord>& jobs) {
  std::string failures;
  for (const auto& j : jobs)
    if (j.failed())
      failures += fmt::format("| {} | {} | {} | {} |\n", cell_name(j), j.stage(), j.status_text(),
                              md_cell(j.reason.empty() ? (j.cause.empty() ? "–" : j.cause) : j.reason));
  if (failures.empty()) return "";
  return "## Runs without a result\n\nNot divergences: these ended for other reasons (see `fwlab show JOB`).\n\n"
         "| cell | stage | status | reason |\n| :--- | :--- | :--- | :--- |\n" +
         failures + "\n";
}

}  // namespace

// Every grid axis, and the mixer settings the papers compare, where they vary.
std::vector<StabilityRow> stability_by_setting(const ResultSet& results) {
  const auto& ex = results.experiment();
  std::vector<std::string> settings;
  for (const auto& a : ex.axes) settings.push_back(a.name);
  for (const std::string k : {"rule", "feature_map", "norm", "m"})
    if (std::find(settings.begin(), settings.end(), k) == settings.end()) settings.push_back(k);
  std::vector<StabilityRow> out;
  for (const auto& name : settings) {
    std::vector<StabilityRow> rows;  // one per value, in the order the runs show them
    for (const auto& j : results.jobs()) {
      if (!j.finished() && !j.diverged()) continue;
      const auto v = job_value(j, name);
      if (v.is_null()) continue;  // a run without this setting (the softmax teacher has no rule)
      const auto text = value_text(v);
      auto row = std::find_if(rows.begin(), rows.end(), [&](const StabilityRow& r) { return r.value == text; });
      if (row == rows.end()) row = rows.insert(rows.end(), {name, text});
      ++row->runs;
      row->diverged += j.diverged();
    }
    if (rows.size() >= 2) out.insert(out.end(), rows.begin(), rows.end());
  }
  return out;
}

std::string divergence_report(const ResultSet& results, bool with_comparison) {
  const auto& ex = results.experiment();
  const auto& jobs = results.jobs();
  std::string out = fmt::format("# Divergence report: {}{}\n\n", ex.name,
                                results.profile().empty() ? "" : fmt::format(" ({} profile)", results.profile()));
  std::map<std::string, int> by_status;
  for (const auto& j : jobs) ++by_status[j.status_text()];
  std::vector<std::string> counts;
  for (const auto& [s, n] : by_status) counts.push_back(fmt::format("{} {}", n, s));
  out += fmt::format("{} cells: {}.\n\n", jobs.size(), fmt::join(counts, ", "));
  out += diverged_runs_section(ex, jobs) + stability_section(results) + frontier_section(ex, jobs) +
         failures_section(jobs) + kernel_fallback_section(jobs) + throughput_section(results);
  const auto table = table_spec(ex);
  const auto published = with_comparison ? published_spec(ex, table) : std::nullopt;
  if (published) {  // where the table's markers stand against the paper's
    auto comparison = render_comparison(compare_with_published(build_table(results, table), *published));
    out += "## Against the published table\n\n" + comparison.substr(comparison.find("\n\n") + 2) + "\n";
  }
  return out;
}

}  // namespace fwlab

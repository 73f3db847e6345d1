// The throughput check of `fwlab report` (analysis/report_throughput.h). A table's speed column is each job's median
// interval rate; on a machine whose speed changes (a shared host's neighbours, a build beside the job) that median
// depends on when the job ran, and a row can look 1.5x faster than another for no reason in the model. Within one
// job the work per interval is the same, so a spread of its rates measures the machine, not the model.
#include "analysis/report_throughput.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "analysis/spec.h"
#include "harness/plan.h"

namespace fwlab {

namespace {

constexpr double kSteadySpread = 1.2;  // 90th over 10th percentile of a job's interval rates

double percentile(const std::vector<double>& sorted, double p) {
  const double at = p * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(at)), hi = static_cast<size_t>(std::ceil(at));
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (at - static_cast<double>(lo));
}

bool shows_speed(const ResultSet& results) {
  for (const auto& m : table_spec(results.experiment()).metrics)
    if (m.key == "tokens_per_s" || m.key == "step_ms") return true;
  return false;
}

}  // namespace

std::string throughput_section(const ResultSet& results) {
  if (!shows_speed(results)) return "";
  std::string rows;
  int checked = 0;
  for (const auto& j : results.jobs()) {
    std::vector<double> rates;
    for (const auto& [step, v] : results.series(j.id(), "tokens_per_s"))
      if (std::isfinite(v) && v > 0) rates.push_back(v);
    if (rates.size() < 4) continue;
    rates.erase(rates.begin());  // the first interval includes the warm-up
    std::sort(rates.begin(), rates.end());
    ++checked;
    const double p10 = percentile(rates, 0.1), p90 = percentile(rates, 0.9);
    if (p90 <= kSteadySpread * p10) continue;
    const auto label = coords_label(j.planned.coords);
    rows += fmt::format("| {} | {} | {} | {:.0f} | {:.0f} – {:.0f} | {:.2f}× |\n", label == "-" ? "–" : label,
                        j.stage(), j.id(), percentile(rates, 0.5), p10, p90, p90 / p10);
  }
  if (checked == 0) return "";
  std::string out = "## Throughput during the runs\n\n";
  if (rows.empty())
    return out + fmt::format(
                     "Every job's training speed held while it ran: in each of the {} jobs its logged "
                     "intervals (the first, warm-up, left out) stay within {:.0f}% from the 10th to the 90th "
                     "percentile.\n\n",
                     checked, 100 * (kSteadySpread - 1));
  return out +
         fmt::format(
             "In these jobs the logged intervals' training speed (the first, warm-up, left out) spread by more "
             "than {:.0f}% from the 10th to the 90th percentile. Every interval does the same work, so the "
             "machine's speed changed while they ran (another process, or a shared host's neighbours): their "
             "tokens/s compares with other rows only within that spread. Run them again on a quiet machine, "
             "one job at a time.\n\n| cell | stage | job | median tokens/s | 10th – 90th percentile | spread |\n"
             "| :--- | :--- | :--- | ---: | ---: | ---: |\n",
             100 * (kSteadySpread - 1)) +
         rows + "\n";
}

}  // namespace fwlab

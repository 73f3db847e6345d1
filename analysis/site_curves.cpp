// The experiment page's overlaid curves and stability bars (analysis/site_sections.h).
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "analysis/html.h"
#include "analysis/report.h"
#include "analysis/site_sections.h"

namespace fwlab {

namespace {

// What the curves show: the validation quantity of the table's first evaluation metric, else the loss.
std::string curve_field(const TableSpec& spec) {
  for (const auto& m : spec.metrics)
    if (m.source == Metric::Source::Eval) return m.field;
  return "loss";
}

html::Series job_series(const JobRecord& j, const std::string& field, std::string name) {
  html::Series s{std::move(name), {}, std::nullopt};
  for (const auto& e : j.evals)
    if (e.split == "valid" && e.field(field)) s.points.emplace_back(static_cast<double>(e.step), *e.field(field));
  if (j.diverged())
    s.stopped_at = static_cast<double>(j.divergence       ? j.divergence->step
                                       : s.points.empty() ? 0.0
                                                          : s.points.back().first);
  return s;
}

// The reduced axes' values that tell a cell's runs apart ("seed=1"); "" for a cell of one run.
std::string run_suffix(const JobRecord& j, const TableSpec& spec, size_t runs_in_cell) {
  if (runs_in_cell < 2) return "";
  std::vector<std::string> parts;
  for (const auto& [axis, how] : spec.reduce) parts.push_back(axis + "=" + value_text(job_value(j, axis)));
  return parts.empty() ? " · " + j.id().substr(0, 8) : fmt::format(" · {}", fmt::join(parts, ", "));
}

struct Curves {
  const TableSpec& spec;
  std::map<std::string, const JobRecord*> by_id;
  std::string field;

  void add_cell(std::vector<html::Series>& out, const CellValue& cell, const std::string& name) const {
    for (const auto& id : cell.job_ids)
      if (const auto it = by_id.find(id); it != by_id.end() && it->second->status)
        out.push_back(job_series(*it->second, field, name + run_suffix(*it->second, spec, cell.job_ids.size())));
  }
  std::string chart(const std::string& title, const std::vector<html::Series>& series) const {
    if (series.empty()) return "";
    // A loss or a perplexity that spans decades reads on a log axis; an accuracy never does.
    return html::line_chart(title, series, field != "accuracy" && html::spans_decades(series));
  }
};

std::string row_name(const Table& t, size_t r) {
  std::vector<std::string> labels;  // a reference row leaves the other row axes' labels empty
  for (const auto& l : t.row_labels[r])
    if (!l.empty()) labels.push_back(l);
  return fmt::format("{}", fmt::join(labels, ", "));
}

}  // namespace

std::string cell_curves_html(const ResultSet& results, const TableSpec& spec, const Table& table) {
  Curves c{spec, {}, curve_field(spec)};
  for (const auto& j : results.jobs()) c.by_id[j.id()] = &j;
  const auto what = "validation " + c.field;
  std::string out;
  const size_t columns = table.column_headers.size(), rows = table.cells.size();
  if (columns >= 2)
    for (size_t r = 0; r < rows; ++r) {
      std::vector<html::Series> series;
      for (size_t k = 0; k < columns && k < table.cells[r].size(); ++k)
        c.add_cell(series, table.cells[r][k], table.column_headers[k]);
      out += c.chart(fmt::format("{} — row {}, one line per column", what, row_name(table, r)), series);
    }
  if (rows >= 2)
    for (size_t k = 0; k < columns; ++k) {
      std::vector<html::Series> series;
      for (size_t r = 0; r < rows; ++r)
        if (k < table.cells[r].size()) c.add_cell(series, table.cells[r][k], row_name(table, r));
      out += c.chart(fmt::format("{} — column {}, one line per row", what, table.column_headers[k]), series);
    }
  return out.empty() ? "<p>No validation curves: the table has a single cell, or its cells have not run.</p>\n" : out;
}

std::string stability_chart_html(const ResultSet& results) {
  std::vector<html::Bar> bars;
  for (const auto& r : stability_by_setting(results))
    bars.push_back({fmt::format("{} = {}", r.setting, r.value), fmt::format("{} of {} diverged", r.diverged, r.runs),
                    static_cast<double>(r.diverged) / r.runs});
  return bars.empty() ? "" : html::bar_chart("share of runs that diverged, by setting", bars);
}

}  // namespace fwlab

// One experiment's page (analysis/site.h): table, comparison, divergence report, plots and jobs.
#include <fmt/format.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "analysis/compare.h"
#include "analysis/html.h"
#include "analysis/markdown.h"
#include "analysis/plot.h"
#include "analysis/report.h"
#include "analysis/site.h"
#include "analysis/site_sections.h"
#include "analysis/table.h"
#include "harness/experiment.h"

namespace fwlab {

namespace fs = std::filesystem;
using html::esc;

namespace {

// The cell's text links to its first job; further jobs (seeds, learning rates) get numbered links.
std::string cell_html(const CellValue& c) {
  if (c.job_ids.empty()) return esc(c.text);
  std::string out = fmt::format("<a href=\"../{}\">{}</a>", esc(job_href(c.job_ids[0])), esc(c.text));
  for (size_t i = 1; i < c.job_ids.size(); ++i)
    out += fmt::format(" <a href=\"../{}\"><sup>{}</sup></a>", esc(job_href(c.job_ids[i])), i + 1);
  return out;
}

std::string table_html(const Table& t) {
  std::string out = fmt::format("<table class=\"results\">\n<caption>{}</caption>\n<tr>", esc(t.title));
  for (const auto& h : t.row_headers) out += fmt::format("<th class=\"label\">{}</th>", esc(h));
  for (const auto& h : t.column_headers) out += fmt::format("<th>{}</th>", esc(h));
  out += "</tr>\n";
  for (size_t r = 0; r < t.cells.size(); ++r) {
    out += "<tr>";
    for (const auto& label : t.row_labels[r]) out += fmt::format("<td class=\"label\">{}</td>", esc(label));
    for (const auto& c : t.cells[r]) out += fmt::format("<td>{}</td>", cell_html(c));
    out += "</tr>\n";
  }
  out += "</table>\n";
  // Captions, notes and the legend are Markdown (emphasis, code, lists), as `fwlab table` prints them.
  if (!t.caption.empty()) out += "<div class=\"caption\">" + html::markdown(t.caption) + "</div>\n";
  for (const auto& n : t.notes) out += html::markdown(n);
  for (const auto& l : t.legend) out += "<small>" + html::markdown(l) + "</small>\n";
  return out;
}

std::string read_whole(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// gnuplot's SVGs, each shown through an <img> from a data: address: self-contained, and an image never runs
// anything its file holds.
std::string plots_html(const ResultSet& results, const TableSpec& spec, const std::vector<PlotSpec>& plots,
                       const std::string& gnuplot) {
  std::string tmpl = (fs::temp_directory_path() / "fwlab-site-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) return "<p>plots: no temporary folder</p>\n";
  std::string out;
  try {
    for (const auto& f : make_plots(results, spec, plots, tmpl, gnuplot))
      out += fmt::format(
          "<figure><img class=\"plot\" alt=\"{0}\" src=\"data:image/svg+xml;base64,{1}\"><figcaption>{0}: "
          "{2}</figcaption></figure>\n",
          esc(f.name), html::base64(read_whole(fs::path(tmpl) / (f.name + ".svg"))),
          esc(fmt::format("{}", fmt::join(f.series, "; "))));
  } catch (const PlotError& e) {
    out += fmt::format("<p>plots: {}</p>\n", esc(e.what()));
  }
  std::error_code ec;
  fs::remove_all(tmpl, ec);
  return out;
}

// The report's "# Divergence report: NAME" line: the page has its own heading.
std::string without_title(const std::string& report) {
  return report.rfind("# ", 0) == 0 && report.find('\n') != std::string::npos ? report.substr(report.find('\n') + 1)
                                                                              : report;
}

std::string jobs_html(const ResultSet& results, bool& running) {
  std::string out =
      "<table>\n<tr><th class=\"label\">stage</th><th class=\"label\">cell</th><th class=\"label\">status</th>"
      "<th class=\"label\">job</th></tr>\n";
  for (const auto& j : results.jobs()) {
    const auto status = j.status_text();
    running = running || j.active() || j.status == JobStatus::pending || j.status == JobStatus::submitted;
    const auto link = j.status ? fmt::format("<a href=\"../{}\">{}</a>", esc(job_href(j.id())), esc(j.id()))
                               : esc(j.planned.applicable ? j.id() : "-");
    out += fmt::format(
        "<tr><td class=\"label\">{}</td><td class=\"label\">{}</td><td class=\"label status-{}\">{}</td><td "
        "class=\"label\">{}</td></tr>\n",
        esc(j.stage()), esc(coords_label(j.planned.coords)), esc(status), esc(status), link);
  }
  return out + "</table>\n";
}

}  // namespace

std::string experiment_page(Db& db, const SiteEntry& e, const SiteContext& ctx, std::vector<std::string>* linked_jobs) {
  const auto title = fmt::format("{} [{}]", e.name, e.profile.empty() ? "no profile" : e.profile);
  const auto nav = "<nav><a href=\"../index.html\">all experiments</a></nav>\n";
  try {
    const auto ex = load_experiment(e.file, e.profile);
    const auto spec = table_spec(ex);
    const auto plots = plot_specs(ex, spec);
    const auto published = published_spec(ex, spec);
    const ResultSet results(ex, e.profile, db, ctx.repo_root, ctx.fwlab_version);
    const auto table = build_table(results, spec);
    bool running = false;
    const auto jobs = jobs_html(results, running);
    std::string body = fmt::format("{}<h1>{}</h1>\n<p>{}</p>\n<p><small>{}</small></p>\n<h2>Table</h2>\n{}", nav,
                                   esc(title), esc(ex.description), esc(e.file), table_html(table));
    for (const auto& name : table_names(ex))  // [tables.NAME]: the file's further tables
      body += fmt::format("<h2>Table: {}</h2>\n{}", esc(name), table_html(build_table(results, table_spec(ex, name))));
    body += fmt::format("<p><a href=\"{}\">Every run</a>, its settings and metrics, sortable and filterable.</p>\n",
                        esc(runs_href(e).substr(2)));
    body += "<h2>Curves by row and column</h2>\n<div class=\"curves\">\n" + cell_curves_html(results, spec, table) +
            "</div>\n";
    if (published)
      body += "<h2>Against the paper</h2>\n" +
              html::markdown(render_comparison(compare_with_published(table, *published)), 1);
    body += "<h2>Divergence report</h2>\n" + stability_chart_html(results) +
            html::markdown(without_title(divergence_report(results, false)), 1);  // the comparison has its own section
    body += "<h2>Plots</h2>\n" + plots_html(results, spec, plots, ctx.gnuplot);
    body += "<h2>Jobs</h2>\n" + jobs;
    if (linked_jobs)
      for (const auto& j : results.jobs())
        if (j.status) linked_jobs->push_back(j.id());
    return html::page(title, body, ctx.live && running ? 10 : 0);
  } catch (const ExperimentError& err) {
    return html::page(title, fmt::format("{}<h1>{}</h1>\n<p>The experiment file cannot be read: {}</p>\n", nav,
                                         esc(title), esc(err.what())));
  }
}

}  // namespace fwlab

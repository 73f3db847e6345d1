// An experiment's runs page (analysis/site.h): every job with its settings and key metrics, sorted and filtered by
// the query. No script: served pages read the query from the address, static pages are written one per sort
// column and direction and one per setting value.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "analysis/html.h"
#include "analysis/site.h"
#include "analysis/table.h"
#include "harness/experiment.h"

namespace fwlab {

using html::esc;

namespace {

struct RunsTable {
  std::string title;
  std::vector<std::string> columns;  // the settings ("stage", the grid's axes, "status"), then the metrics
  size_t settings = 0;
  struct Row {
    std::string id;
    bool has_page = false;
    std::vector<std::string> text;              // per column, as shown
    std::vector<std::optional<double>> number;  // per column, where it is a number (sorts numerically)
  };
  std::vector<Row> rows;  // grid order

  size_t column(const std::string& name, bool setting_only) const {
    const auto end = setting_only ? columns.begin() + static_cast<long>(settings) : columns.end();
    const auto it = std::find(columns.begin(), end, name);
    if (it == end)
      throw std::invalid_argument(fmt::format("the runs page has no {} '{}' (it has: {})",
                                              setting_only ? "setting" : "column", name,
                                              fmt::join(columns.begin(), end, ", ")));
    return static_cast<size_t>(it - columns.begin());
  }
  std::vector<std::string> values_of(size_t c) const {  // distinct, in the order the runs show them
    std::vector<std::string> out;
    for (const auto& r : rows)
      if (std::find(out.begin(), out.end(), r.text[c]) == out.end()) out.push_back(r.text[c]);
    return out;
  }
};

std::vector<Metric> key_metrics(const TableSpec& spec) {
  auto metrics = spec.metrics;
  if (std::none_of(metrics.begin(), metrics.end(), [](const Metric& m) { return m.name == "valid_loss"; }))
    metrics.push_back(parse_metric("valid_loss"));
  return metrics;
}

void add_metric(RunsTable::Row& row, const Metric& m, const JobRecord& j, const ResultSet& results) {
  const auto v = m.value(j, results);
  row.number.push_back(v);
  row.text.push_back(!v ? "–" : m.is_count ? compact_count(*v) : fmt::format("{:.4g}", *v));
}

RunsTable load_runs(Db& db, const SiteEntry& e, const SiteContext& ctx) {
  const auto ex = load_experiment(e.file, e.profile);
  const ResultSet results(ex, e.profile, db, ctx.repo_root, ctx.fwlab_version);
  const auto metrics = key_metrics(table_spec(ex));
  RunsTable t;
  t.title = fmt::format("runs of {} [{}]", e.name, e.profile.empty() ? "no profile" : e.profile);
  t.columns.push_back("stage");
  for (const auto& a : ex.axes) t.columns.push_back(a.name);
  t.columns.push_back("status");
  t.settings = t.columns.size();
  for (const auto& m : metrics) t.columns.push_back(m.name);
  for (const auto& j : results.jobs()) {
    if (!j.planned.applicable) continue;
    RunsTable::Row row{j.id(), j.status.has_value(), {j.stage()}, {std::nullopt}};
    for (const auto& a : ex.axes) {
      const auto v = job_value(j, a.name);
      row.text.push_back(value_text(v));
      row.number.push_back(v.is_number() ? std::optional<double>(v.get<double>()) : std::nullopt);
    }
    row.text.push_back(j.status_text()), row.number.push_back(std::nullopt);
    for (const auto& m : metrics) add_metric(row, m, j, results);
    t.rows.push_back(std::move(row));
  }
  return t;
}

// A cell's rank class: numbers first, then text, then no value ("–", empty, or a number that is not finite).
int rank_class(const RunsTable::Row& r, size_t c) {
  if (r.number[c]) return std::isfinite(*r.number[c]) ? 0 : 2;
  return r.text[c] == "–" || r.text[c].empty() ? 2 : 1;
}

// Runs without a value go last whichever the direction; numbers before text; ties keep grid order.
void sort_rows(RunsTable& t, size_t c, bool descending) {
  std::stable_sort(t.rows.begin(), t.rows.end(), [&](const RunsTable::Row& a, const RunsTable::Row& b) {
    const int ka = rank_class(a, c), kb = rank_class(b, c);
    if (ka != kb || ka == 2) return ka < kb;
    if (ka == 0) return descending ? *a.number[c] > *b.number[c] : *a.number[c] < *b.number[c];
    return descending ? a.text[c] > b.text[c] : a.text[c] < b.text[c];
  });
}

RunsTable apply(RunsTable t, const RunsQuery& q) {
  for (const auto& filter : q.filters) {  // not a structured binding: clang 14 cannot capture one
    const auto c = t.column(filter.first, true);
    const auto& value = filter.second;
    t.rows.erase(std::remove_if(t.rows.begin(), t.rows.end(), [&](const auto& r) { return r.text[c] != value; }),
                 t.rows.end());
  }
  if (!q.sort.empty()) sort_rows(t, t.column(q.sort, false), q.descending);
  return t;
}

std::string percent_encode(const std::string& s) {
  std::string out;
  for (unsigned char c : s)
    out += std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ? std::string(1, static_cast<char>(c))
                                                                           : fmt::format("%{:02X}", c);
  return out;
}

// The page's file name in e/ (links are relative to it) without ".html".
std::string runs_stem(const SiteEntry& e) {
  const auto href = runs_href(e);
  return href.substr(2, href.size() - 2 - 5);
}

// Where a link of the page goes: the served page with a query, or one of the static pages (which sort by one
// column or filter by one setting: a filter drops the sort; "" for two filters).
struct Links {
  const SiteEntry& e;
  const RunsTable& all;  // unfiltered: value indices of static file names
  bool live;

  std::string to(const RunsQuery& q) const {
    const auto stem = runs_stem(e);
    if (live) {
      std::vector<std::string> params;
      if (!q.sort.empty()) params.push_back("sort=" + percent_encode(q.sort));
      if (q.descending) params.push_back("order=desc");
      for (const auto& [k, v] : q.filters) params.push_back(percent_encode(k) + "=" + percent_encode(v));
      return stem + ".html" + (params.empty() ? "" : fmt::format("?{}", fmt::join(params, "&")));
    }
    if (q.filters.size() > 1) return "";
    if (!q.sort.empty() && q.filters.empty())
      return fmt::format("{}.s{}{}.html", stem, all.column(q.sort, false), q.descending ? "d" : "a");
    if (q.filters.empty()) return stem + ".html";
    const auto c = all.column(q.filters[0].first, true);
    const auto values = all.values_of(c);
    const auto v = std::find(values.begin(), values.end(), q.filters[0].second) - values.begin();
    return fmt::format("{}.f{}-{}.html", stem, c, v);
  }
};

std::string link(const std::string& href, const std::string& text) {
  return href.empty() ? esc(text) : fmt::format("<a href=\"{}\">{}</a>", esc(href), esc(text));
}

RunsQuery without_filter(RunsQuery q, const std::string& setting) {
  q.filters.erase(std::remove_if(q.filters.begin(), q.filters.end(), [&](const auto& f) { return f.first == setting; }),
                  q.filters.end());
  return q;
}

// One line per setting that takes two or more values: "rule: all · add · decay", the chosen value in bold.
std::string filters_html(const RunsTable& all, const RunsQuery& q, const Links& links) {
  std::string out;
  for (size_t c = 0; c < all.settings; ++c) {
    const auto values = all.values_of(c);
    if (values.size() < 2) continue;
    const auto& name = all.columns[c];
    const auto chosen =
        std::find_if(q.filters.begin(), q.filters.end(), [&](const auto& f) { return f.first == name; });
    std::vector<std::string> parts{chosen == q.filters.end() ? "<b>all</b>"
                                                             : link(links.to(without_filter(q, name)), "all")};
    for (const auto& v : values) {
      auto to = without_filter(q, name);
      to.filters.emplace_back(name, v);
      parts.push_back(chosen != q.filters.end() && chosen->second == v ? "<b>" + esc(v.empty() ? "(none)" : v) + "</b>"
                                                                       : link(links.to(to), v.empty() ? "(none)" : v));
    }
    out += fmt::format("<p class=\"filter\">{}: {}</p>\n", esc(name), fmt::join(parts, " · "));
  }
  return out;
}

std::string header_html(const RunsTable& t, const RunsQuery& q, const Links& links) {
  std::string out = "<tr><th class=\"label\">job</th>";
  for (size_t c = 0; c < t.columns.size(); ++c) {
    auto to = q;
    to.sort = t.columns[c];
    to.descending = q.sort == t.columns[c] && !q.descending;
    const auto mark = q.sort != t.columns[c] ? "" : q.descending ? " ▼" : " ▲";
    const bool sortable = links.live || q.filters.empty();  // a static filtered page is not sorted again
    out += fmt::format("<th{}>{}{}</th>", c < t.settings ? " class=\"label\"" : "",
                       sortable ? link(links.to(to), t.columns[c]) : esc(t.columns[c]), mark);
  }
  return out + "</tr>\n";
}

std::string rows_html(const RunsTable& t) {
  std::string out;
  for (const auto& r : t.rows) {
    out +=
        fmt::format("<tr><td class=\"label\">{}</td>",
                    r.has_page ? fmt::format("<a href=\"../{}\">{}</a>", esc(job_href(r.id)), esc(r.id.substr(0, 12)))
                               : esc(r.id.substr(0, 12)));
    for (size_t c = 0; c < t.columns.size(); ++c)
      out += fmt::format("<td{}>{}</td>",
                         c + 1 == t.settings ? fmt::format(" class=\"label status-{}\"", esc(r.text[c]))
                         : c < t.settings    ? std::string(" class=\"label\"")
                                             : std::string(),
                         esc(r.text[c]));
    out += "</tr>\n";
  }
  return out;
}

std::string render(const RunsTable& all, const SiteEntry& e, const RunsQuery& q, bool live) {
  const Links links{e, all, live};
  const auto shown = apply(all, q);
  std::string body = fmt::format(
      "<nav><a href=\"../index.html\">all experiments</a> · <a href=\"{}\">the experiment</a></nav>\n<h1>{}</h1>\n"
      "<p>{} of {} runs{}. Click a column to sort by it, a value to keep only its runs.{}</p>\n",
      esc(experiment_href(e).substr(2)), esc(all.title), shown.rows.size(), all.rows.size(),
      q.filters.empty() ? "" : " shown",
      live ? ""
           : " This static page sorts by one column or filters by one setting; "
             "<code>fwlab serve</code> combines them.");
  body += filters_html(all, q, links);
  body += "<table class=\"runs\">\n" + header_html(shown, q, links) + rows_html(shown) + "</table>\n";
  return html::page(all.title, body);
}

std::string unreadable_page(const SiteEntry& e, const ExperimentError& err) {
  return html::page(e.name,
                    fmt::format("<nav><a href=\"../index.html\">all experiments</a></nav>\n<h1>runs of {}</h1>\n"
                                "<p>The experiment file cannot be read: {}</p>\n",
                                esc(e.name), esc(err.what())));
}

}  // namespace

std::string runs_href(const SiteEntry& e) {
  const auto page = experiment_href(e);
  return page.substr(0, page.size() - 5) + ".runs.html";
}

std::string runs_page(Db& db, const SiteEntry& e, const SiteContext& ctx, const RunsQuery& query) {
  try {
    return render(load_runs(db, e, ctx), e, query, ctx.live);
  } catch (const ExperimentError& err) {
    return unreadable_page(e, err);
  }
}

std::vector<std::pair<std::string, std::string>> runs_pages(Db& db, const SiteEntry& e, const SiteContext& ctx) {
  RunsTable all;
  try {
    all = load_runs(db, e, ctx);
  } catch (const ExperimentError& err) {
    return {{runs_href(e), unreadable_page(e, err)}};
  }
  const Links links{e, all, false};
  std::vector<RunsQuery> queries{{}};
  for (const auto& column : all.columns)
    for (bool descending : {false, true}) queries.push_back({column, descending, {}});
  for (size_t c = 0; c < all.settings; ++c)
    if (all.values_of(c).size() >= 2)
      for (const auto& v : all.values_of(c)) queries.push_back({"", false, {{all.columns[c], v}}});
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& q : queries) out.emplace_back("e/" + links.to(q), render(all, e, q, false));
  return out;
}

}  // namespace fwlab

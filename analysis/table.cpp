#include "analysis/table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "contract/job/mqar_settings.h"
#include "contract/job/retrieval_settings.h"

namespace fwlab {

namespace {

std::string format_number(double v, const Metric& metric, int digits) {
  return metric.is_count ? compact_count(v) : fmt::format("{:.{}f}", v, digits);
}

// The values an axis (or "stage") takes among `jobs`, in grid order.
std::vector<nlohmann::json> axis_values(const Experiment& ex, const TableSpec& spec, const std::string& axis) {
  std::vector<nlohmann::json> out;
  if (axis == "stage") {
    for (const auto& s : spec.stages) out.emplace_back(s);
    return out;
  }
  for (const auto& a : ex.axes)
    if (a.name == axis) out = a.values;
  return out;
}

// Every combination of the axes' values (first axis slowest) that at least one job has.
std::vector<std::vector<nlohmann::json>> combinations(const ResultSet& results, const TableSpec& spec,
                                                      const std::vector<std::string>& axes,
                                                      const std::vector<const JobRecord*>& jobs) {
  std::vector<std::vector<nlohmann::json>> all = {{}};
  for (const auto& axis : axes) {
    std::vector<std::vector<nlohmann::json>> next;
    for (const auto& prefix : all)
      for (const auto& v : axis_values(results.experiment(), spec, axis)) {
        auto c = prefix;
        c.push_back(v);
        next.push_back(std::move(c));
      }
    all = std::move(next);
  }
  std::vector<std::vector<nlohmann::json>> present;
  for (const auto& c : all) {
    const bool any = std::any_of(jobs.begin(), jobs.end(), [&](const JobRecord* j) {
      for (size_t i = 0; i < axes.size(); ++i)
        if (job_value(*j, axes[i]) != c[i]) return false;
      return true;
    });
    if (any) present.push_back(c);
  }
  return present;
}

std::string value_label(const TableSpec& spec, const nlohmann::json& v) { return spec.label(value_text(v)); }

std::string key_text(const std::vector<nlohmann::json>& key) {
  std::vector<std::string> parts;
  for (const auto& v : key) parts.push_back(value_text(v));
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string column_header(const TableSpec& spec, const std::vector<std::string>& axes,
                          const std::vector<nlohmann::json>& key, const Metric* metric) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < axes.size(); ++i) {
    const auto text = value_text(key[i]);
    // A labelled or named value speaks for itself; a bare number needs its axis ("m=16").
    parts.push_back(spec.axis_value(axes[i], text, key[i].is_string()));
  }
  if (metric) parts.push_back(spec.label(metric->name));
  return fmt::format("{}", fmt::join(parts, ", "));
}

// Marker -> meaning; the legend lists the markers the table uses.
const std::vector<std::pair<std::string, std::string>> kLegend = {
    {"*", "*: every run of the cell diverged"},
    {"(*", "(*k/n): k of the cell's n runs diverged; the value is over the others"},
    {"†", "†: diverged after its best checkpoint: the value is that checkpoint's ((†k/n): k of n runs did)"},
    {"N/A", "N/A: the combination does not apply"},
    {"–", "–: not run yet"},
    {"…", "…: still running, or after a value: some runs of the cell are not done yet"},
    {"!", "!: failed, crashed, timed out or blocked (see fwlab status); after a value: some runs did"},
    {"?", "?: finished without this metric"},
    {"≈ chance",
     "≈ chance: within a tenth of the way from chance (1 / pairs; over several MQAR points, points / their pairs "
     "summed) to perfect recall: not learnt"},
};

// An MQAR evaluation over several points (test_points, else the training mix's) takes a batch from each in turn and
// pools their queries, n per sequence at a point of n pairs: one query in n right at each, so chance is the number of
// points over their pairs summed (7 / 508 over Zoology's test points, not the first point's 1/4).
std::optional<double> mqar_points_chance(const JobRecord& j) {
  auto points = job_value(j, "data.mqar.test_points");
  if (!points.is_array() || points.empty()) points = job_value(j, "data.mqar.mix");
  if (!points.is_array() || points.empty()) return std::nullopt;
  double pairs = 0;
  for (const auto& p : points) pairs += p.at(1).get<double>();
  return static_cast<double>(points.size()) / pairs;
}

// The accuracy of a model that has learnt a generated task's format but not recall: it names one of the n values in
// context at random (the plateau MQAR models sit on before recall is learnt, as in Zoology; the same for the
// retrieval task). None for other data.
std::optional<double> chance_accuracy(const JobRecord& j) {
  const auto source = job_value(j, "data.source");
  if (source != "mqar" && source != "retrieval") return std::nullopt;
  if (source == "mqar")
    if (const auto pooled = mqar_points_chance(j)) return pooled;
  const auto pairs = job_value(j, fmt::format("data.{}.pairs", source.get<std::string>()));
  const auto fallback = source == "mqar" ? MqarSpec{}.pairs : RetrievalSpec{}.pairs;
  return 1.0 / (pairs.is_number() ? pairs.get<double>() : static_cast<double>(fallback));
}

// A quick run may not leave chance at all: its number alone would read as a (poor) result.
bool at_chance(const CellValue& c, const Metric& metric, const std::vector<const JobRecord*>& jobs) {
  if (metric.field != "accuracy" || jobs.empty()) return false;
  const auto chance = chance_accuracy(*jobs.front());
  return chance && c.mean < *chance + 0.1 * (1.0 - *chance);
}

bool uses_marker(const std::string& text, const std::string& marker) {
  if (marker == "*") return text == "*";
  if (marker == "!" || marker == "…")
    return text == marker || (text.size() > marker.size() && text.ends_with(" " + marker));
  if (marker == "–" || marker == "N/A" || marker == "?") return text == marker;
  return text.find(marker) != std::string::npos;
}

}  // namespace

CellValue reduce_cell(const std::vector<const JobRecord*>& jobs, const Metric& metric, const ResultSet& results,
                      const std::map<std::string, std::string>& reduce, int digits) {
  CellValue c;
  std::map<std::string, std::vector<double>> groups;  // "best" axes' values -> values of finished runs
  for (const auto* j : jobs) {
    if (!j->planned.applicable) continue;
    ++c.runs;
    c.job_ids.push_back(j->id());
    // A run that diverged after validating keeps its best checkpoint's evaluation: a value, marked. Only finished
    // and diverged runs (and settings) are looked up: a running job's partial record gives no value.
    const bool looked_up =
        j->finished() || metric.from_config() || (j->diverged() && metric.source == Metric::Source::Eval);
    const auto v = looked_up ? metric.value(*j, results) : std::nullopt;
    const bool after_best = j->diverged() && metric.source == Metric::Source::Eval && v;
    if (after_best)
      ++c.after_best;
    else if (j->diverged())
      ++c.diverged;
    else if (j->failed())
      ++c.failed;
    else if (!j->finished())
      ++c.unfinished;
    if (!v) continue;
    nlohmann::json key = nlohmann::json::object();
    for (const auto& [axis, how] : reduce)
      if (how == "best") key[axis] = job_value(*j, axis);
    groups[key.dump()].push_back(*v);
  }
  if (c.runs == 0) {
    c.kind = jobs.empty() ? CellValue::Kind::NotRun : CellValue::Kind::NotApplicable;
    c.text = jobs.empty() ? "–" : "N/A";
    return c;
  }
  const std::vector<double>* best = nullptr;
  double best_mean = 0;
  for (const auto& [key, values] : groups) {
    double mean = 0;
    for (double v : values) mean += v;
    mean /= static_cast<double>(values.size());
    if (!best || (metric.higher_is_better ? mean > best_mean : mean < best_mean)) best = &values, best_mean = mean;
  }
  if (!best && metric.source == Metric::Source::Config) {  // a setting this model does not have (m of softmax)
    c.kind = CellValue::Kind::Value;
    c.text = "none";
    return c;
  }
  if (!best) {
    using K = CellValue::Kind;
    const bool finished_any = c.runs > c.diverged + c.failed + c.unfinished;
    c.kind = c.diverged == c.runs                                                                    ? K::Diverged
             : std::any_of(jobs.begin(), jobs.end(), [](const JobRecord* j) { return j->active(); }) ? K::Running
             : c.unfinished > 0                                                                      ? K::NotRun
             : finished_any                                                                          ? K::Missing
                                                                                                     : K::Failed;
    c.text = c.kind == K::Diverged  ? "*"
             : c.kind == K::Running ? "…"
             : c.kind == K::NotRun  ? "–"
             : c.kind == K::Missing ? "?"
                                    : "!";
    return c;
  }
  c.kind = CellValue::Kind::Value;
  c.values = static_cast<int>(best->size());
  c.mean = best_mean;
  if (best->size() > 1) {
    double ss = 0;
    for (double v : *best) ss += (v - best_mean) * (v - best_mean);
    c.sd = std::sqrt(ss / static_cast<double>(best->size() - 1));
  }
  c.text = format_number(c.mean, metric, digits);
  if (metric.source == Metric::Source::Config) c.text = value_text(nlohmann::json(c.mean));
  if (metric.from_config()) return c;  // a property of the configuration: how its runs went does not change it
  if (c.values > 1) c.text += " ± " + format_number(c.sd, metric, digits);
  if (at_chance(c, metric, jobs)) c.text += " ≈ chance";
  if (c.after_best > 0) c.text += c.runs == 1 ? " †" : fmt::format(" (†{}/{})", c.after_best, c.runs);
  if (c.diverged > 0) c.text += fmt::format(" (*{}/{})", c.diverged, c.runs);
  if (c.unfinished > 0) c.text += " …";
  if (c.failed > 0) c.text += " !";
  return c;
}

ReferenceJobs reference_jobs(const ResultSet& results, const TableSpec& spec, const TableSpec::Reference& ref,
                             const std::vector<std::string>& matched) {
  ReferenceJobs r;
  for (const auto& j : results.jobs())
    if (j.stage() == ref.stage) r.jobs.push_back(&j);
  for (const auto& s : results.experiment().stages)
    if (s.name == ref.stage)
      for (const auto& a : s.axes)
        if (std::find(matched.begin(), matched.end(), a) == matched.end())
          r.reduce[a] = spec.reduce.count(a) ? spec.reduce.at(a) : "best";
  return r;
}

namespace {

// The jobs of `pool` whose values of `axes` are `key`.
std::vector<const JobRecord*> matching(const std::vector<const JobRecord*>& pool, const std::vector<std::string>& axes,
                                       const std::vector<nlohmann::json>& key) {
  std::vector<const JobRecord*> out;
  for (const auto* j : pool) {
    bool ok = true;
    for (size_t i = 0; i < axes.size() && ok; ++i) ok = job_value(*j, axes[i]) == key[i];
    if (ok) out.push_back(j);
  }
  return out;
}

// Title and caption: the experiment, the profile, the measures and how cells are reduced.
void title_and_caption(Table& t, const ResultSet& results, const TableSpec& spec) {
  const auto& ex = results.experiment();
  t.title =
      fmt::format("{}{}", ex.name, results.profile().empty() ? "" : fmt::format(" ({} profile)", results.profile()));
  std::vector<std::string> reduced;
  for (const auto& [axis, how] : spec.reduce)
    reduced.push_back(how == "best" ? fmt::format("best over {}", axis) : fmt::format("mean ± sd over {}", axis));
  std::vector<std::string> measures;
  for (const auto& m : spec.metrics)
    if (std::find(measures.begin(), measures.end(), m.units()) == measures.end()) measures.push_back(m.units());
  // A caption that ends a sentence of its own gets no second full stop ("..").
  const std::string& lead = spec.caption.empty() ? ex.description : spec.caption;
  const char* joint = lead.empty() ? "" : lead.back() == '.' ? " " : ". ";
  t.caption = fmt::format("{}{}Cells: {}{}.", lead, joint, fmt::join(measures, "; "),
                          reduced.empty() ? "" : fmt::format(" ({})", fmt::join(reduced, ", ")));
}

// A reference stage: a row when it shares a column axis with the table (matched on it), else one note line.
void add_reference(Table& t, const ResultSet& results, const TableSpec& spec, const TableSpec::Reference& ref,
                   const std::vector<std::vector<nlohmann::json>>& col_keys) {
  const auto& ex = results.experiment();
  const bool several = spec.metrics.size() > 1;
  const auto& stage =
      *std::find_if(ex.stages.begin(), ex.stages.end(), [&](const Stage& s) { return s.name == ref.stage; });
  std::vector<std::string> shared;
  for (const auto& c : spec.columns)
    if (std::find(stage.axes.begin(), stage.axes.end(), c) != stage.axes.end()) shared.push_back(c);
  const auto [pool, reduce] = reference_jobs(results, spec, ref, shared);
  if (shared.empty() && !ref.row) {
    std::vector<std::string> parts;
    for (const auto& m : spec.metrics) {
      const auto c = reduce_cell(pool, m, results, reduce, spec.digits_for(m.name));
      parts.push_back(several ? fmt::format("{} {}", spec.label(m.name), c.text) : c.text);
    }
    t.notes.push_back(fmt::format("{}: {}", ref.label, fmt::join(parts, ", ")));
    return;
  }
  std::vector<std::string> labels(spec.rows.size(), "");
  if (!labels.empty()) labels[0] = ref.label;
  t.row_labels.push_back(labels);
  t.row_keys.emplace_back();
  std::vector<CellValue> row;
  for (const auto& ck : col_keys) {
    std::vector<nlohmann::json> key;
    for (const auto& a : shared)
      key.push_back(ck[std::find(spec.columns.begin(), spec.columns.end(), a) - spec.columns.begin()]);
    for (const auto& m : spec.metrics)
      row.push_back(reduce_cell(matching(pool, shared, key), m, results, reduce, spec.digits_for(m.name)));
  }
  t.cells.push_back(std::move(row));
}

// The legend lines of the markers the cells and notes use.
void add_legend(Table& t) {
  for (const auto& [marker, meaning] : kLegend) {
    bool used = false;
    for (const auto& row : t.cells)
      for (const auto& c : row) used = used || uses_marker(c.text, marker);
    for (const auto& n : t.notes)
      used = used || (marker != "N/A" && n.ends_with(": " + marker)) ||
             (marker == "≈ chance" && n.find(marker) != std::string::npos);
    if (used) t.legend.push_back(meaning);
  }
}

// table.average: the mean of a row's values, when every one of its cells has one; table.percent_of: that mean
// over the named reference row's.
void add_averages(Table& t, const TableSpec& spec) {
  if (!spec.average) return;
  std::vector<std::optional<double>> means;
  std::optional<double> base;
  for (size_t r = 0; r < t.cells.size(); ++r) {
    double sum = 0;
    bool all = !t.cells[r].empty();
    for (const auto& c : t.cells[r]) all = all && c.kind == CellValue::Kind::Value, sum += c.mean;
    means.push_back(all ? std::optional(sum / static_cast<double>(t.cells[r].size())) : std::nullopt);
    if (!spec.percent_of.empty() && !t.row_labels[r].empty() && t.row_labels[r][0] == spec.percent_of &&
        t.row_keys[r].empty())
      base = means.back();
  }
  t.column_headers.push_back("average");
  if (!spec.percent_of.empty()) t.column_headers.push_back("% of " + spec.percent_of);
  for (size_t r = 0; r < t.cells.size(); ++r) {
    const auto text = [](std::optional<double> v, int digits) {
      return v ? fmt::format("{:.{}f}", *v, digits) : std::string("–");
    };
    CellValue avg;
    avg.kind = means[r] ? CellValue::Kind::Value : CellValue::Kind::Missing;
    avg.mean = means[r].value_or(0), avg.text = text(means[r], spec.digits);
    t.cells[r].push_back(avg);
    if (spec.percent_of.empty()) continue;
    const auto pct = means[r] && base && *base != 0 ? std::optional(100.0 * *means[r] / *base) : std::nullopt;
    CellValue p;
    p.kind = pct ? CellValue::Kind::Value : CellValue::Kind::Missing;
    p.mean = pct.value_or(0), p.text = text(pct, 1);
    t.cells[r].push_back(p);
  }
  for (const char* name : {"average", "percent_of"}) {
    if (std::string(name) == "percent_of" && spec.percent_of.empty()) break;
    t.column_keys.emplace_back();
    t.column_metrics.push_back(name);
  }
}

}  // namespace

Table build_table(const ResultSet& results, const TableSpec& spec) {
  Table t;
  std::vector<const JobRecord*> jobs;
  for (const auto& j : results.jobs())
    if (std::find(spec.stages.begin(), spec.stages.end(), j.stage()) != spec.stages.end()) jobs.push_back(&j);
  title_and_caption(t, results, spec);
  for (const auto& a : spec.rows) t.row_headers.push_back(spec.label(a));
  const auto row_keys = combinations(results, spec, spec.rows, jobs);
  const auto col_keys = combinations(results, spec, spec.columns, jobs);
  const bool several = spec.metrics.size() > 1;
  for (const auto& ck : col_keys)
    for (const auto& m : spec.metrics) {
      t.column_headers.push_back(spec.columns.empty() ? spec.label(m.name)
                                                      : column_header(spec, spec.columns, ck, several ? &m : nullptr));
      t.column_keys.push_back(key_text(ck));
      t.column_metrics.push_back(m.name);
    }
  for (const auto& rk : row_keys) {
    std::vector<std::string> labels;
    for (const auto& v : rk) labels.push_back(value_label(spec, v));
    t.row_labels.push_back(labels);
    t.row_keys.push_back(key_text(rk));
    const auto in_row = matching(jobs, spec.rows, rk);
    std::vector<CellValue> row;
    for (const auto& ck : col_keys)
      for (const auto& m : spec.metrics)
        row.push_back(
            reduce_cell(matching(in_row, spec.columns, ck), m, results, spec.reduce, spec.digits_for(m.name)));
    t.cells.push_back(std::move(row));
  }
  for (const auto& ref : spec.references) add_reference(t, results, spec, ref, col_keys);
  add_averages(t, spec);
  add_legend(t);
  return t;
}

namespace {

std::string tex_escape(const std::string& s) {
  static const std::vector<std::pair<std::string, std::string>> kMap = {{"\\", "\\textbackslash{}"},
                                                                        {"&", "\\&"},
                                                                        {"%", "\\%"},
                                                                        {"$", "\\$"},
                                                                        {"#", "\\#"},
                                                                        {"_", "\\_"},
                                                                        {"{", "\\{"},
                                                                        {"}", "\\}"},
                                                                        {"~", "\\textasciitilde{}"},
                                                                        {"^", "\\textasciicircum{}"},
                                                                        {"±", "$\\pm$"},
                                                                        {"†", "$\\dagger$"},
                                                                        {"≈", "$\\approx$"},
                                                                        {"…", "\\dots{}"},
                                                                        {"–", "--"},
                                                                        {"×", "$\\times$"},
                                                                        {"✗", "$\\times$"},
                                                                        {"φ", "$\\phi$"},
                                                                        {"·", "$\\cdot$"},
                                                                        {"≤", "$\\le$"}};
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (const auto u = static_cast<unsigned char>(s[i]); u < 0x20 || u == 0x7f) {  // a blank line ends a tabular row
      out += ' ';
      ++i;
      continue;
    }
    bool hit = false;
    for (const auto& [from, to] : kMap)
      if (s.compare(i, from.size(), from) == 0) {
        out += to;
        i += from.size();
        hit = true;
        break;
      }
    if (!hit) out += s[i++];
  }
  return out;
}

// The header line, then one line per row: label cells then value cells, each through `escape`.
std::vector<std::vector<std::string>> text_grid(const Table& t, std::string (*escape)(const std::string&)) {
  std::vector<std::vector<std::string>> grid(1);
  for (const auto& h : t.row_headers) grid[0].push_back(escape(h));
  for (const auto& h : t.column_headers) grid[0].push_back(escape(h));
  for (size_t r = 0; r < t.cells.size(); ++r) {
    grid.emplace_back();
    for (const auto& l : t.row_labels[r]) grid.back().push_back(escape(l));
    for (const auto& c : t.cells[r]) grid.back().push_back(escape(c.text));
  }
  return grid;
}

}  // namespace

// A CSV field. Spreadsheets run a text cell starting with = + - @ as a formula (CSV injection): such cells
// get a leading apostrophe, unless they are plain numbers.
std::string csv_field(const std::string& text) {
  std::string s = text;
  if (!s.empty() && std::string("=+-@\t\r").find(s[0]) != std::string::npos) {
    char* end = nullptr;
    std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size()) s = "'" + s;
  }
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string render_markdown(const Table& t) {
  std::string out = fmt::format("### {}\n\n{}\n\n", t.title, t.caption);
  const auto grid = text_grid(t, md_escape);
  std::vector<std::string> align(t.row_headers.size(), ":---");
  align.resize(grid[0].size(), "---:");
  out += fmt::format("| {} |\n| {} |\n", fmt::join(grid[0], " | "), fmt::join(align, " | "));
  for (size_t r = 1; r < grid.size(); ++r) out += fmt::format("| {} |\n", fmt::join(grid[r], " | "));
  out += "\n";
  for (const auto& n : t.notes) out += fmt::format("Reference: {}\n\n", n);
  if (!t.legend.empty()) out += fmt::format("Legend: {}.\n", fmt::join(t.legend, " · "));
  return out;
}

std::string render_latex(const Table& t) {
  std::string out = "% Generated by fwlab table; needs \\usepackage{booktabs}.\n\\begin{table}[t]\n\\centering\n";
  out += fmt::format("\\begin{{tabular}}{{{}{}}}\n\\toprule\n", std::string(t.row_headers.size(), 'l'),
                     std::string(t.column_headers.size(), 'r'));
  const auto grid = text_grid(t, tex_escape);
  out += fmt::format("{} \\\\\n\\midrule\n", fmt::join(grid[0], " & "));
  for (size_t r = 1; r < grid.size(); ++r) out += fmt::format("{} \\\\\n", fmt::join(grid[r], " & "));
  out += "\\bottomrule\n\\end{tabular}\n";
  std::string caption = t.caption;
  for (const auto& n : t.notes) caption += " Reference: " + n + ".";
  if (!t.legend.empty()) caption += " " + fmt::format("{}.", fmt::join(t.legend, "; "));
  out += fmt::format("\\caption{{{}: {}}}\n\\end{{table}}\n", tex_escape(t.title), tex_escape(caption));
  return out;
}

std::string render_csv(const Table& t) {
  std::string out;
  for (const auto& line : text_grid(t, csv_field)) out += fmt::format("{}\n", fmt::join(line, ","));
  return out;
}

}  // namespace fwlab

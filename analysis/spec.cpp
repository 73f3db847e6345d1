#include "analysis/spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <stdexcept>

namespace fwlab {

namespace {

class Reader {
 public:
  explicit Reader(const Experiment& ex) : ex_(ex) {}

  // Position of `key`, or of the closest enclosing key that has one.
  SourcePos pos(std::string key) const {
    while (!key.empty()) {
      if (auto it = ex_.analysis_pos.find(key); it != ex_.analysis_pos.end()) return it->second;
      const auto cut = key.find_last_of(".[");
      if (cut == std::string::npos) break;
      key.resize(cut);
    }
    return {ex_.file, 1, 1, ""};
  }
  [[noreturn]] void fail(const std::string& key, const std::string& message) const {
    throw ExperimentError(fmt::format("{}: {}: {}", pos(key).str(), key, message));
  }

  std::vector<std::string> names(const nlohmann::json& v, const std::string& key) const {
    if (v.is_string()) return {v.get<std::string>()};
    if (!v.is_array()) fail(key, "must be a name or a list of names");
    std::vector<std::string> out;
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string()) fail(fmt::format("{}[{}]", key, i), "must be a name");
      out.push_back(v[i].get<std::string>());
    }
    return out;
  }
  std::string text(const nlohmann::json& v, const std::string& key) const {
    if (!v.is_string()) fail(key, "must be a string");
    return v.get<std::string>();
  }
  Metric metric(const nlohmann::json& v, const std::string& key) const {
    try {
      return parse_metric(text(v, key));
    } catch (const std::invalid_argument& e) {
      fail(key, e.what());
    }
  }
  void known_keys(const nlohmann::json& t, const std::string& where, const std::vector<std::string>& known) const {
    for (const auto& [k, v] : t.items())
      if (std::find(known.begin(), known.end(), k) == known.end())
        fail(where + "." + k, "unknown key" + did_you_mean(k, known));
  }

 private:
  const Experiment& ex_;
};

const Stage* find_stage(const Experiment& ex, const std::string& name) {
  for (const auto& s : ex.stages)
    if (s.name == name) return &s;
  return nullptr;
}

std::vector<std::string> stage_names(const Experiment& ex) {
  std::vector<std::string> out;
  for (const auto& s : ex.stages) out.push_back(s.name);
  return out;
}

Metric default_metric(const Experiment& ex) {
  const auto get = [&](const std::string& key) -> std::string {
    auto it = ex.defaults.find(key);
    return it != ex.defaults.end() && it->second.value.is_string() ? it->second.value.get<std::string>() : "";
  };
  if (get("kind") == "generation-bench") return parse_metric("gen_ms_per_token");
  if (get("data.source") == "mqar" || get("data.source") == "retrieval") return parse_metric("test_accuracy");
  return parse_metric("test_ppl");
}

// table.average and table.percent_of: the mean over a row's metric columns, and that mean over a reference row's.
void average_columns(Reader& r, const nlohmann::json& t, TableSpec& spec) {
  if (t.contains("average")) {
    if (!t["average"].is_boolean()) r.fail("table.average", "must be true or false");
    spec.average = t["average"].get<bool>();
    if (spec.average && !spec.columns.empty())
      r.fail("table.average", "averages a row's metrics: the table's columns must be its metrics (columns = [])");
  }
  if (!t.contains("percent_of")) return;
  spec.percent_of = r.text(t["percent_of"], "table.percent_of");
  if (!spec.average) r.fail("table.percent_of", "compares row averages: set table.average = true");
  const auto ref = std::find_if(spec.references.begin(), spec.references.end(),
                                [&](const auto& x) { return x.label == spec.percent_of; });
  if (ref == spec.references.end() || !ref->row)
    r.fail("table.percent_of",
           fmt::format("'{}' is not the label of a table.reference with row = true", spec.percent_of));
}

}  // namespace

namespace {

// table.stage: the stages the table reads (the last stage by default); returns the axes they vary.
std::set<std::string> read_table_stages(Reader& r, const Experiment& ex, const nlohmann::json& t, TableSpec& spec) {
  spec.stages =
      t.contains("stage") ? r.names(t["stage"], "table.stage") : std::vector<std::string>{ex.stages.back().name};
  if (spec.stages.empty()) r.fail("table.stage", "must name at least one stage");
  std::set<std::string> axes;
  for (size_t i = 0; i < spec.stages.size(); ++i) {
    const auto* st = find_stage(ex, spec.stages[i]);
    if (!st)
      r.fail(t["stage"].is_array() ? fmt::format("table.stage[{}]", i) : "table.stage",
             fmt::format("no stage '{}'{}", spec.stages[i], did_you_mean(spec.stages[i], stage_names(ex))));
    axes.insert(st->axes.begin(), st->axes.end());
  }
  return axes;
}

// table.rows and table.columns (by default the first axis in rows, the others in columns); returns the axes used.
std::set<std::string> read_rows_and_columns(Reader& r, const Experiment& ex, const nlohmann::json& t,
                                            const std::set<std::string>& axes, TableSpec& spec) {
  std::vector<std::string> axis_order;  // grid order
  for (const auto& a : ex.axes)
    if (axes.count(a.name)) axis_order.push_back(a.name);
  if (spec.stages.size() > 1) axis_order.push_back("stage");
  if (t.contains("rows") || t.contains("columns")) {
    spec.rows = t.contains("rows") ? r.names(t["rows"], "table.rows") : std::vector<std::string>{};
    spec.columns = t.contains("columns") ? r.names(t["columns"], "table.columns") : std::vector<std::string>{};
  } else if (!axis_order.empty()) {
    spec.rows = {axis_order.front()};
    spec.columns.assign(axis_order.begin() + 1, axis_order.end());
  }
  std::set<std::string> used;
  for (const auto& [list, field] :
       {std::pair{&spec.rows, std::string("rows")}, std::pair{&spec.columns, std::string("columns")}})
    for (size_t i = 0; i < list->size(); ++i) {
      const auto& name = (*list)[i];
      const auto key =
          t.contains(field) && t[field].is_array() ? fmt::format("table.{}[{}]", field, i) : "table." + field;
      if (name != "stage" && !axes.count(name))
        r.fail(key, fmt::format("'{}' is not an axis of stage {}{}", name, fmt::join(spec.stages, ", "),
                                did_you_mean(name, axis_order)));
      if (!used.insert(name).second) r.fail(key, fmt::format("'{}' is used twice", name));
    }
  return used;
}

void read_table_metrics(Reader& r, const Experiment& ex, const nlohmann::json& t, TableSpec& spec) {
  if (t.contains("metric") && t.contains("metrics")) r.fail("table.metrics", "give either metric or metrics, not both");
  if (t.contains("metric")) spec.metrics = {r.metric(t["metric"], "table.metric")};
  if (t.contains("metrics")) {
    const auto list = r.names(t["metrics"], "table.metrics");
    if (list.empty()) r.fail("table.metrics", "must name at least one metric");
    for (size_t i = 0; i < list.size(); ++i)
      spec.metrics.push_back(r.metric(list[i], fmt::format("table.metrics[{}]", i)));
  }
  if (spec.metrics.empty()) spec.metrics = {default_metric(ex)};
}

// table.reduce: how the runs of an axis that is neither a row nor a column combine in a cell ("best" or "mean").
void read_reduce(Reader& r, const Experiment& ex, const nlohmann::json& t, const std::set<std::string>& axes,
                 const std::set<std::string>& used, TableSpec& spec) {
  if (t.contains("reduce")) {
    if (!t["reduce"].is_object()) r.fail("table.reduce", "must be a table of axis = \"best\" | \"mean\"");
    for (const auto& [axis, how] : t["reduce"].items()) {
      const auto key = "table.reduce." + axis;
      if (!axes.count(axis))
        r.fail(key, fmt::format("'{}' is not an axis of stage {}", axis, fmt::join(spec.stages, ", ")));
      if (used.count(axis)) r.fail(key, fmt::format("'{}' is already a row or column axis", axis));
      const auto h = r.text(how, key);
      if (h != "best" && h != "mean")
        r.fail(key,
               fmt::format("must be \"best\" (the best value over the axis) or \"mean\" (mean ± sd), got \"{}\"", h));
      spec.reduce[axis] = h;
    }
  }
  // experiment.seeds: its seeds pool into mean ± sd unless the table says otherwise.
  if (ex.seeds > 1 && axes.count("seed") && !used.count("seed") && !spec.reduce.count("seed"))
    spec.reduce["seed"] = "mean";
  // An axis that varies inside a cell must say how its runs combine: a silent choice would hide runs.
  for (const auto& a : ex.axes)
    if (axes.count(a.name) && !used.count(a.name) && !spec.reduce.count(a.name) && a.values.size() > 1)
      r.fail(t.contains("reduce") ? "table.reduce" : "table",
             fmt::format("axis '{}' varies within a cell: make it a row or column, or add it to table.reduce "
                         "(\"best\" or \"mean\")",
                         a.name));
  if (spec.stages.size() > 1 && !used.count("stage"))
    r.fail("table.stage", "several stages: put \"stage\" in rows or columns");
}

// table.digits = 2, or per metric: digits = { test_bpc = 3, tokens_per_s = 0 }.
void read_digits(Reader& r, const nlohmann::json& t, TableSpec& spec) {
  if (!t.contains("digits")) return;
  const auto decimals = [&](const nlohmann::json& v, const std::string& key) {
    if (!v.is_number_integer() || v.get<int>() < 0 || v.get<int>() > 12) r.fail(key, "must be an integer from 0 to 12");
    return v.get<int>();
  };
  if (!t["digits"].is_object()) {
    spec.digits = decimals(t["digits"], "table.digits");
    return;
  }
  std::vector<std::string> names;
  for (const auto& m : spec.metrics) names.push_back(m.name);
  for (const auto& [name, v] : t["digits"].items()) {
    if (std::find(names.begin(), names.end(), name) == names.end())
      r.fail("table.digits." + name,
             fmt::format("'{}' is not a metric of the table{}", name, did_you_mean(name, names)));
    spec.metric_digits[name] = decimals(v, "table.digits." + name);
  }
}

// table.reference: stages shown as reference rows or levels ({ label, stage, row }).
void read_references(Reader& r, const Experiment& ex, const nlohmann::json& t, TableSpec& spec) {
  if (!t.contains("reference")) return;
  if (!t["reference"].is_array()) r.fail("table.reference", "must be a list of { label = ..., stage = ... }");
  for (size_t i = 0; i < t["reference"].size(); ++i) {
    const auto key = fmt::format("table.reference[{}]", i);
    const auto& e = t["reference"][i];
    if (!e.is_object()) r.fail(key, "must be { label = ..., stage = ... }");
    r.known_keys(e, key, {"label", "stage", "row"});
    if (!e.contains("stage")) r.fail(key, "needs a stage");
    TableSpec::Reference ref{e.contains("label") ? r.text(e["label"], key + ".label") : "",
                             r.text(e["stage"], key + ".stage")};
    if (!find_stage(ex, ref.stage))
      r.fail(key + ".stage", fmt::format("no stage '{}'{}", ref.stage, did_you_mean(ref.stage, stage_names(ex))));
    if (ref.label.empty()) ref.label = ref.stage;
    if (e.contains("row")) {
      if (!e["row"].is_boolean()) r.fail(key + ".row", "must be true or false");
      ref.row = e["row"].get<bool>();
    }
    spec.references.push_back(ref);
  }
}

}  // namespace

TableSpec table_spec(const Experiment& ex) {
  Reader r(ex);
  const auto& t = ex.table;
  r.known_keys(t, "table",
               {"stage", "rows", "columns", "metric", "metrics", "reduce", "digits", "labels", "reference", "caption",
                "average", "percent_of"});
  TableSpec spec;
  const auto axes = read_table_stages(r, ex, t, spec);
  const auto used = read_rows_and_columns(r, ex, t, axes, spec);
  read_table_metrics(r, ex, t, spec);
  read_reduce(r, ex, t, axes, used, spec);
  read_digits(r, t, spec);
  if (t.contains("labels")) {
    if (!t["labels"].is_object()) r.fail("table.labels", "must be a table of value = \"label\"");
    for (const auto& [k, v] : t["labels"].items()) spec.labels[k] = r.text(v, "table.labels." + k);
  }
  read_references(r, ex, t, spec);
  if (t.contains("caption")) spec.caption = r.text(t["caption"], "table.caption");
  average_columns(r, t, spec);
  return spec;
}

TableSpec table_spec(const Experiment& ex, const std::string& name) {
  if (name.empty()) return table_spec(ex);
  if (!ex.tables.contains(name)) {
    const auto names = table_names(ex);
    throw ExperimentError(
        fmt::format("{}:1:1: tables.{}: the file has no [tables.{}]{}", ex.file, name, name,
                    names.empty() ? std::string(" (it has no further tables)") : did_you_mean(name, names)));
  }
  // [table]'s reader, on a copy whose [table] is this one (its positions moved along, its errors renamed back).
  Experiment as_main = ex;
  as_main.table = ex.tables[name];
  const std::string prefix = "tables." + name;
  for (const auto& [key, pos] : ex.analysis_pos)
    if (key.rfind(prefix, 0) == 0) as_main.analysis_pos["table" + key.substr(prefix.size())] = pos;
  try {
    return table_spec(as_main);
  } catch (const ExperimentError& e) {
    std::string what = e.what();
    if (const auto at = what.find(": table"); at != std::string::npos) what.replace(at + 2, 5, prefix);
    throw ExperimentError(what);
  }
}

std::vector<std::string> table_names(const Experiment& ex) {
  std::vector<std::string> out;
  for (const auto& [name, t] : ex.tables.items()) out.push_back(name);
  return out;
}

std::vector<PlotSpec> plot_specs(const Experiment& ex, const TableSpec& table) {
  Reader r(ex);
  std::vector<PlotSpec> out;
  for (size_t i = 0; i < ex.plots.size(); ++i) {
    const auto key = fmt::format("plot[{}]", i);
    const auto& p = ex.plots[i];
    r.known_keys(p, key, {"kind", "metric", "series", "x"});
    PlotSpec spec;
    if (!p.contains("kind")) r.fail(key, "needs a kind (\"vs_m\", \"versus\", \"vs_tokens\" or \"generation\")");
    spec.kind = r.text(p["kind"], key + ".kind");
    if (spec.kind != "vs_m" && spec.kind != "versus" && spec.kind != "generation" && spec.kind != "vs_tokens")
      r.fail(key + ".kind",
             fmt::format("unknown kind '{}' (vs_m: metric against state size m; versus: metric against the axis x; "
                         "vs_tokens: a validation metric against training tokens; generation: ms per token and "
                         "state memory against sequence length){}",
                         spec.kind, did_you_mean(spec.kind, {"vs_m", "versus", "vs_tokens", "generation"})));
    if (spec.kind == "versus") {
      if (!p.contains("x")) r.fail(key, "kind \"versus\" needs x: the grid axis along the x axis");
      spec.x = r.text(p["x"], key + ".x");
      std::vector<std::string> axes;
      for (const auto& a : ex.axes) axes.push_back(a.name);
      if (std::find(axes.begin(), axes.end(), spec.x) == axes.end())
        r.fail(key + ".x", fmt::format("'{}' is not an axis of the grid{}", spec.x, did_you_mean(spec.x, axes)));
    } else if (p.contains("x")) {
      r.fail(key + ".x", fmt::format("only kind \"versus\" takes x (\"{}\" has its own)", spec.kind));
    }
    if (spec.kind == "vs_m") spec.x = "m";
    // Default: the table's evaluation metric (its columns may also hold parameters or throughput).
    const auto eval = std::find_if(table.metrics.begin(), table.metrics.end(),
                                   [](const Metric& m) { return m.source == Metric::Source::Eval; });
    spec.metric = p.contains("metric")          ? r.metric(p["metric"], key + ".metric")
                  : eval != table.metrics.end() ? *eval
                                                : table.metrics.front();
    if (spec.kind == "vs_tokens" && (spec.metric.source != Metric::Source::Eval || spec.metric.split != "valid"))
      r.fail(key + ".metric", fmt::format("kind \"vs_tokens\" draws a validation curve: a valid_ metric (valid_ppl, "
                                          "valid_accuracy, ...), not '{}'",
                                          spec.metric.name));
    auto cells = table.rows;  // vs_tokens: a line per cell, its columns too
    if (spec.kind == "vs_tokens") cells.insert(cells.end(), table.columns.begin(), table.columns.end());
    spec.series = p.contains("series") ? r.names(p["series"], key + ".series") : cells;
    out.push_back(spec);
  }
  return out;
}

std::vector<std::string> table_keys(const Experiment& ex, const TableSpec& table,
                                    const std::vector<std::string>& axes) {
  std::vector<std::string> keys = {""};
  for (const auto& axis : axes) {
    std::vector<std::string> values;
    if (axis == "stage") values = table.stages;
    for (const auto& a : ex.axes)
      if (a.name == axis)
        for (const auto& v : a.values) values.push_back(value_text(v));
    std::vector<std::string> next;
    for (const auto& k : keys)
      for (const auto& v : values) next.push_back(k.empty() ? v : k + ", " + v);
    keys = std::move(next);
  }
  return keys;
}

namespace {

PublishedCell published_cell(const Reader& r, const nlohmann::json& v, const std::string& key) {
  if (v.is_number()) return {PublishedCell::Kind::Value, v.get<double>()};
  if (v.is_string() && v == "*") return {PublishedCell::Kind::Diverged, 0};
  if (v.is_string() && v == "N/A") return {PublishedCell::Kind::NotApplicable, 0};
  if (v.is_string() && v == "") return {PublishedCell::Kind::NotReported, 0};
  r.fail(key, "must be a number, \"*\" (diverged), \"N/A\" or \"\" (not reported)");
}

// published.columns: the keys of the table's columns the published values stand in ({""} without column axes).
std::vector<std::string> published_columns(const Reader& r, const nlohmann::json& p, const TableSpec& table,
                                           const std::vector<std::string>& column_keys) {
  if (table.columns.empty()) {
    if (p.contains("columns")) r.fail("published.columns", "the table has no column axes: give each row one value");
    return {""};
  }
  if (!p.contains("columns"))
    r.fail("published",
           fmt::format("needs columns: the keys of the table's columns ({})", fmt::join(table.columns, ", ")));
  const auto columns = r.names(p["columns"], "published.columns");
  for (size_t i = 0; i < columns.size(); ++i) {
    const auto& c = columns[i];
    if (std::find(column_keys.begin(), column_keys.end(), c) == column_keys.end())
      r.fail(fmt::format("published.columns[{}]", i),
             fmt::format("'{}' is not a column of the table{}", c, did_you_mean(c, column_keys)));
    if (std::count(columns.begin(), columns.end(), c) > 1)
      r.fail(fmt::format("published.columns[{}]", i), fmt::format("'{}' appears twice", c));
  }
  return columns;
}

// published.metric (or the table's first measured metric): the one metric the published columns stand beside.
void published_metric(const Reader& r, const nlohmann::json& p, const TableSpec& table, PublishedSpec& spec) {
  std::vector<std::string> metric_names;
  for (const auto& m : table.metrics) metric_names.push_back(m.name);
  const auto chosen = p.contains("metric") ? r.text(p["metric"], "published.metric") : "";
  const auto it = std::find_if(table.metrics.begin(), table.metrics.end(),
                               [&](const Metric& m) { return chosen.empty() ? !m.from_config() : m.name == chosen; });
  if (it == table.metrics.end())
    r.fail(chosen.empty() ? "published" : "published.metric",
           chosen.empty()
               ? "the table has no measured metric to compare"
               : fmt::format("'{}' is not a metric of the table{}", chosen, did_you_mean(chosen, metric_names)));
  spec.metric = *it;
  if (spec.higher_is_better != spec.metric.higher_is_better)
    r.fail("published.better", fmt::format("the table's {} is better {}", spec.metric.name,
                                           spec.metric.higher_is_better ? "higher" : "lower"));
}

// published.metrics: one published column per metric, for a table whose columns are its metrics (evaluation
// tasks). Every metric shares the paper's direction; a metric the table does not measure is kept (see spec.h).
void published_metric_columns(const Reader& r, const nlohmann::json& p, const TableSpec& table, PublishedSpec& spec) {
  if (!table.columns.empty()) r.fail("published.metrics", "needs a table whose columns are its metrics (columns = [])");
  for (const char* other : {"metric", "columns"})
    if (p.contains(other))
      r.fail(fmt::format("published.{}", other), "give either metrics (one per column) or metric and columns");
  if (!p["metrics"].is_array() || p["metrics"].empty())
    r.fail("published.metrics", "must be a list of the table's metrics, one per published column");
  for (size_t i = 0; i < p["metrics"].size(); ++i) {
    const auto key = fmt::format("published.metrics[{}]", i);
    const auto m = r.metric(p["metrics"][i], key);
    if (m.higher_is_better != spec.higher_is_better)
      r.fail(key, fmt::format("{} is better {}", m.name, m.higher_is_better ? "higher" : "lower"));
    spec.metric_columns.push_back(m);
  }
  spec.metric = spec.metric_columns.front();
  spec.columns.assign(spec.metric_columns.size(), "");
}

}  // namespace

std::optional<PublishedSpec> published_spec(const Experiment& ex, const TableSpec& table) {
  const auto& p = ex.published;
  if (p.empty()) return std::nullopt;
  Reader r(ex);
  r.known_keys(p, "published", {"source", "note", "metric", "metrics", "better", "columns", "rows"});
  PublishedSpec spec;
  if (!p.contains("source")) r.fail("published", "needs a source (the paper and its table)");
  spec.source = r.text(p["source"], "published.source");
  if (p.contains("note")) spec.note = r.text(p["note"], "published.note");
  if (!p.contains("better"))
    r.fail("published", "needs better = \"lower\" or \"higher\" (the metric's direction in the paper)");
  const auto better = r.text(p["better"], "published.better");
  if (better != "lower" && better != "higher")
    r.fail("published.better", fmt::format("must be \"lower\" or \"higher\", got \"{}\"", better));
  spec.higher_is_better = better == "higher";
  if (p.contains("metrics"))
    published_metric_columns(r, p, table, spec);
  else
    published_metric(r, p, table, spec);

  // Keys of the grid as the file wrote it: a row or column that a --set or profile subset left out is set aside.
  Experiment written = ex;
  for (auto& axis : written.axes)
    if (const auto it = ex.written_axes.find(axis.name); it != ex.written_axes.end()) axis.values = it->second;
  auto row_keys = table_keys(written, table, table.rows), kept_rows = table_keys(ex, table, table.rows);
  for (const auto& ref : table.references)  // a reference row (the teacher) stands beside the paper's by its label
    if (ref.row) row_keys.push_back(ref.label), kept_rows.push_back(ref.label);
  const auto kept_columns = table_keys(ex, table, table.columns);
  auto kept = [](const std::vector<std::string>& keys, const std::string& k) {
    return std::find(keys.begin(), keys.end(), k) != keys.end();
  };
  const auto columns = spec.metric_columns.empty()
                           ? published_columns(r, p, table, table_keys(written, table, table.columns))
                           : spec.columns;
  if (spec.metric_columns.empty())
    for (const auto& c : columns)
      if (c.empty() || kept(kept_columns, c)) spec.columns.push_back(c);
  if (!p.contains("rows") || !p["rows"].is_object() || p["rows"].empty())
    r.fail(p.contains("rows") ? "published.rows" : "published",
           "needs rows: a table of row key = [values, one per column]");
  for (const auto& [row, values] : p["rows"].items()) {
    const auto key = "published.rows." + row;
    if (!kept(row_keys, row))
      r.fail(key, fmt::format("'{}' is not a row of the table{}", row, did_you_mean(row, row_keys)));
    if (!values.is_array()) r.fail(key, "must be a list of values, one per column");
    if (values.size() != columns.size())
      r.fail(key, fmt::format("has {} values for {} columns", values.size(), columns.size()));
    std::vector<PublishedCell> cells;
    for (size_t i = 0; i < values.size(); ++i) {
      const auto cell = published_cell(r, values[i], fmt::format("{}[{}]", key, i));
      if (columns[i].empty() || kept(kept_columns, columns[i])) cells.push_back(cell);
    }
    if (kept(kept_rows, row)) spec.rows[row] = std::move(cells);
  }
  return spec;
}

}  // namespace fwlab

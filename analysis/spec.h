// The analysis sections of an experiment file: [table] (layout of `fwlab table`) and [[plot]] (extra figures of
// `fwlab plot`), checked against the grid. Errors are ExperimentErrors naming file:line:column and the key.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/metric.h"
#include "harness/experiment.h"

namespace fwlab {

struct TableSpec {
  std::vector<std::string> stages;            // the stages whose jobs fill the table
  std::vector<std::string> rows, columns;     // axis names, or "stage"
  std::vector<Metric> metrics;                // one, or several side by side (each column key x metric)
  std::map<std::string, std::string> reduce;  // other axes that vary within a cell: "best" or "mean"
  int digits = 2;                             // decimals; per metric in metric_digits
  std::map<std::string, int> metric_digits;
  std::map<std::string, std::string> labels;  // display names of axis values, axes and metrics
  struct Reference {
    std::string label, stage;
    bool row = false;  // a row of its own even when it shares no column axis (a teacher beside tasks as columns)
  };
  std::vector<Reference> references;  // other stages shown with the table (the teacher, a softmax baseline)
  std::string caption;
  bool average = false;    // a last column: the mean of each row's values (evaluation tasks)
  std::string percent_of;  // and "% of LABEL": each row's average over that reference row's

  int digits_for(const std::string& metric) const {
    auto it = metric_digits.find(metric);
    return it == metric_digits.end() ? digits : it->second;
  }
  const std::string& label(const std::string& text) const {
    auto it = labels.find(text);
    return it == labels.end() ? text : it->second;
  }
  // A setting's value as the table names it: a string by its label; a number by its label only on the table's own
  // axes (layer selection's "1" = "1/8 softmax" is a value of k, not of seed), elsewhere with its axis ("seed=1").
  std::string axis_value(const std::string& axis, const std::string& text, bool is_string) const {
    const bool own_axis = std::find(rows.begin(), rows.end(), axis) != rows.end() ||
                          std::find(columns.begin(), columns.end(), axis) != columns.end();
    if (is_string || (own_axis && labels.count(text))) return label(text);
    return label(axis) + "=" + text;
  }
};

struct PlotSpec {
  std::string kind;  // vs_m | versus | generation
  std::string x;     // vs_m, versus: the grid axis along x ("m" for vs_m)
  Metric metric;
  std::vector<std::string> series;  // settings whose values name the lines (axes, short names or job keys)
};

// [published]: the paper's own numbers for the table (`fwlab table --compare`, analysis/compare.h).
struct PublishedCell {
  enum class Kind { Value, Diverged, NotApplicable, NotReported };
  Kind kind = Kind::NotReported;
  double value = 0;
};
struct PublishedSpec {
  std::string source;                // the paper and its table ("Mao 2022, Table 1")
  std::string note;                  // how the paper's setting differs (optional)
  Metric metric;                     // the table's metric the numbers stand beside
  bool higher_is_better = false;     // the paper's direction ("better" key), the same as the metric's
  std::vector<std::string> columns;  // column keys: the column axes' values joined by ", " ({""}: no column axes)
  // metrics = [...] instead: a table whose columns are its metrics (evaluation tasks) beside a paper's task
  // columns, one metric per published column. A metric this table does not measure (a profile with other tasks)
  // stays a column of "–" cells and is named in the comparison's caption.
  std::vector<Metric> metric_columns;
  std::map<std::string, std::vector<PublishedCell>> rows;  // row key (row axes' values joined by ", ") -> cells
};

// Without a [table] section: the last stage, its first axis as rows and the other axes as columns, and the
// metric that fits the data (test accuracy for MQAR, ms per token for generation benchmarks, test perplexity).
TableSpec table_spec(const Experiment& ex);
// [tables.NAME]: a further table of the file, with [table]'s keys (`fwlab table FILE --table NAME`); "" is [table].
TableSpec table_spec(const Experiment& ex, const std::string& name);
std::vector<std::string> table_names(const Experiment& ex);  // the [tables.NAME] names, in the file's order
std::vector<PlotSpec> plot_specs(const Experiment& ex, const TableSpec& table);
// The file's [published] section checked against the table's axes and metrics; nullopt without one.
std::optional<PublishedSpec> published_spec(const Experiment& ex, const TableSpec& table);
// Every row (or column) key the grid can give: the axes' values (or the table's stages) joined by ", ".
std::vector<std::string> table_keys(const Experiment& ex, const TableSpec& table, const std::vector<std::string>& axes);

}  // namespace fwlab

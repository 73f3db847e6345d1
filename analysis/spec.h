// The analysis sections of an experiment file: [table] (layout of `fwlab table`) and [[plot]] (extra figures of
// `fwlab plot`), checked against the grid. Errors are ExperimentErrors naming file:line:column and the key.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "analysis/metric.h"
#include "harness/experiment.h"

namespace fwlab {

struct TableSpec {
  std::vector<std::string> stages;           // the stages whose jobs fill the table
  std::vector<std::string> rows, columns;    // axis names, or "stage"
  std::vector<Metric> metrics;               // one, or several side by side (each column key x metric)
  std::map<std::string, std::string> reduce; // other axes that vary within a cell: "best" or "mean"
  int digits = 2;                            // decimals; per metric in metric_digits
  std::map<std::string, int> metric_digits;
  std::map<std::string, std::string> labels; // display names of axis values, axes and metrics
  struct Reference {
    std::string label, stage;
  };
  std::vector<Reference> references;         // other stages shown with the table (the teacher, a softmax baseline)
  std::string caption;

  int digits_for(const std::string& metric) const {
    auto it = metric_digits.find(metric);
    return it == metric_digits.end() ? digits : it->second;
  }
  const std::string& label(const std::string& text) const {
    auto it = labels.find(text);
    return it == labels.end() ? text : it->second;
  }
};

struct PlotSpec {
  std::string kind;                  // vs_m | generation
  Metric metric;
  std::vector<std::string> series;   // settings whose values name the lines (axes, short names or job keys)
};

// Without a [table] section: the last stage, its first axis as rows and the other axes as columns, and the
// metric that fits the data (test accuracy for MQAR, ms per token for generation benchmarks, test perplexity).
TableSpec table_spec(const Experiment& ex);
std::vector<PlotSpec> plot_specs(const Experiment& ex, const TableSpec& table);

}  // namespace fwlab

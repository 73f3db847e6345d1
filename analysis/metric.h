// The quantities a table cell or a plot can show, named as in experiment files: "test_ppl", "valid_bpc",
// "test_accuracy", "params", "state_elements", "config:m", "tokens_per_s", "gen_ms_per_token@1024", and evaluation
// tasks: "task:piqa" (the metric papers report for the task's adapter: acc or acc_norm), "task:lambada.ppl", in
// percent for accuracies.
#pragma once

#include <optional>
#include <string>

#include "analysis/results.h"

namespace fwlab {

struct Metric {
  enum class Source { Eval, Job, Config, Series, Task };
  std::string name;  // as written
  Source source = Source::Eval;
  std::string split;  // Eval: "test" (the best checkpoint's test evaluation) or "valid" (the best validation)
  std::string field;  // Eval: loss | ppl | bpc | accuracy; Job: params | state_elements; Config: job key
  std::string key;  // Series: the metric key; at_step: its value at that step (else see `value`); Task: the task's name
                    // (its `field`: the metric, "" for the adapter's headline one)
  std::optional<int64_t> at_step;
  bool higher_is_better = false;
  bool is_count = false;  // integer-valued (parameters, elements, bytes): printed compactly (842.5k, 1.6M)

  // The job's value, if it has one (a finished job may still lack one, e.g. no test evaluation).
  std::optional<double> value(const JobRecord& job, const ResultSet& results) const;
  // Known from the configuration alone (parameters, state size, a job key): a job has it before it runs.
  bool from_config() const { return source == Source::Job || source == Source::Config; }
  // What it measures, for axis labels and captions: "test perplexity", "ms per generated token", ...
  std::string units() const;  // axis label: "perplexity", "bits per byte", "accuracy", "ms per token", ...
};

// Parses a metric name; std::invalid_argument with a message listing the forms when it is not one.
Metric parse_metric(const std::string& name);

// 842.5k, 1.6M, 512: counts in the form the dry run prints.
std::string compact_count(double n);

}  // namespace fwlab

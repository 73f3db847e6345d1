// Settings derived from results: which layers of a hybrid stay softmax, chosen per cell by a selector from the
// cell's coordinates and, for the selectors that read results, from earlier stages' jobs in the database (one
// probe job per restored layer, or an attention-transfer job's per-layer error). Declared in [derive.NAME]
// (harness/README.md "Derived settings"), checked when the file loads, computed when the stage is planned once its
// inputs have finished, and recorded in the database's derivations table beside the job it made.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "contract/job/job_status.h"
#include "harness/experiment.h"

namespace fwlab {

// A derived setting's inputs did not all end with a result (failed, diverged, crashed): the message names them.
// Not bad input (exit 2): the sweep stops with exit 1.
class DerivationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a selector reads: nothing (the layers follow from their number), the probe stage's jobs (one layer restored
// to softmax each, ranked by `metric`), or the attention-transfer stage's per-layer error.
enum class SelectorInput { none, probes, transfer };

struct SelectorRow {
  std::string name;
  SelectorInput input;
  std::string what;  // the documentation's line
};
const std::vector<SelectorRow>& selector_rows();

struct Derivation {
  std::string name;   // [derive.NAME]
  std::string stage;  // the stage whose jobs get the setting
  std::string key = "model.keep_softmax_layers";
  std::string selector;       // one selector for every cell, or ""
  std::string selector_axis;  // else the axis whose value names each cell's selector
  std::string count_axis;     // the axis whose value is how many layers to choose
  std::string probes;         // probes' stage: each job restores the layers its `probe_key` lists
  std::string probe_key = "model.keep_softmax_layers";
  std::string metric = "valid_kl";  // the probes' ranking: a metric of their record (harness/derive.cpp)
  bool ascending = true;            // lowest first (a KL or a loss)
  std::string transfer;             // transfer_error: the attention-transfer stage
  int64_t seed = 0;                 // random
  SourcePos pos;
};

// ex.derive as derivations; ExperimentError naming file:line:column and the key at fault.
std::vector<Derivation> read_derivations(const Experiment& ex);

// What the results database says of an earlier job.
class JobResults {
 public:
  virtual ~JobResults() = default;
  virtual std::optional<JobStatus> status(const std::string& job_id) const = 0;
  // A metric of the job's record: valid_<f> and test_<f> (f in loss, ppl, bpc, accuracy; the last evaluation),
  // else a metric series' last value (valid_kl, transfer_mse.3, ...).
  virtual std::optional<double> value(const std::string& job_id, const std::string& metric) const = 0;
};

class Db;
// The results database's answers (harness/derive_results.cpp); `db` must outlive them.
std::unique_ptr<JobResults> job_results_in(Db& db);

// An input job of a derivation: its id and the layers it restores (probes), as planned.
struct DerivationInput {
  std::string job_id;
  nlohmann::json layers;  // probes: the value of probe_key; transfer: null
};

// A cell's derived value: ready (the layers, and the record kept in the database), or waiting for inputs not yet
// finished (`waiting` says which). Throws DerivationError when an input ended without a result.
struct Derived {
  bool ready = false;
  nlohmann::json value, record;
  std::string waiting;
};

struct DerivationCell {
  const Derivation& d;
  std::string selector;
  int64_t count = 0, n_layers = 0;
  std::string label;  // the cell, for messages
};

Derived derive_layers(const DerivationCell& cell, const std::vector<DerivationInput>& inputs,
                      const JobResults* results);

}  // namespace fwlab

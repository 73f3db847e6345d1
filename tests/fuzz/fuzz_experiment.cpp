// Experiment files: TOML, fwlab's own validation, every profile, the grid's expansion into jobs, and the
// [table] / [[plot]] sections the analysis commands read.
#include "analysis/plot.h"
#include "analysis/table.h"
#include "harness/experiment.h"
#include "harness/plan.h"
#include "tests/fuzz/fuzz_target.h"

using namespace fwlab;

namespace {

void load_and_plan(const std::string& path, const std::string& profile) {
  try {
    const auto ex = load_experiment(path, profile);
    // A repository root that does not exist: default data paths are missing, so nothing large is hashed.
    plan_jobs(ex, "/nonexistent-fwlab-fuzz-root", kFwlabVersion);
    plot_specs(ex, table_spec(ex));
  } catch (const ExperimentError&) {
  }
}

}  // namespace

FWLAB_FUZZ_TARGET(experiment) {
  const auto path = fuzz::scratch_file("experiment.toml", data, size);
  load_and_plan(path, "");
  try {
    for (const auto& profile : load_experiment(path, "").profiles) load_and_plan(path, profile);
  } catch (const ExperimentError&) {
  }
  return 0;
}

// An experiment file as a command plans it: loaded with the profile and --set, its jobs planned, and every
// --set that would silently do nothing refused (unless --force).
#pragma once

#include <string>
#include <vector>

#include "cli/common.h"
#include "harness/experiment.h"
#include "harness/plan.h"

namespace fwlab::cli {

struct PlannedExperiment {
  Experiment ex;
  std::vector<PlannedJob> jobs;
  std::vector<std::string> waiting;  // cells whose derived settings' inputs have not ended (harness/derive.h)
};

// Plans with what the database (if there is one yet) says of the jobs that derived settings read. Throws
// ExperimentError (the file), ArgumentError (an idle --set, each named with the setting that shadows it) or
// DerivationError (a derived setting's input ended without a result; with `strict` false such a cell waits instead:
// the analysis commands show what the database holds rather than stop).
PlannedExperiment plan_checked(const std::string& file, const std::string& profile, const Common& c,
                               bool strict = true);

}  // namespace fwlab::cli

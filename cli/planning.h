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
};

// Throws ExperimentError (the file) or ArgumentError (an idle --set, each named with the setting that shadows it).
PlannedExperiment plan_checked(const std::string& file, const std::string& profile, const Common& c);

}  // namespace fwlab::cli

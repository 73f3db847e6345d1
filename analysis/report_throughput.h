// The divergence report's check of a timing table: whether each job's training speed held while it ran.
#pragma once

#include <string>

#include "analysis/results.h"

namespace fwlab {

// For an experiment whose table shows training speed (tokens_per_s or step_ms): the jobs whose logged intervals
// (the first, warm-up, left out) spread by more than 20% from the 10th to the 90th percentile, which no model
// difference explains within one job: the machine's speed changed under them. Empty for other tables.
std::string throughput_section(const ResultSet& results);

}  // namespace fwlab

// `fwlab report`: the divergence report of an experiment — every diverged run with its step, cause, tripping
// value, last finite loss, first non-finite layer and learning rate, and how its configuration differs from
// the nearest run that converged; stability by setting; the largest stable learning rate per cell.
#pragma once

#include <string>
#include <vector>

#include "analysis/results.h"

namespace fwlab {

// with_comparison: ends with the table against the paper's ([published]); the site shows that in a section of
// its own and asks without it.
std::string divergence_report(const ResultSet& results, bool with_comparison = true);

// Stability by setting: for every grid axis (and rule, feature_map, norm, m) that takes two or more values among
// the runs with a result (finished or diverged), one row per value, in the order the runs first show it.
struct StabilityRow {
  std::string setting, value;
  int runs = 0, diverged = 0;
};
std::vector<StabilityRow> stability_by_setting(const ResultSet& results);

}  // namespace fwlab

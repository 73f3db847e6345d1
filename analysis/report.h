// `fwlab report`: the divergence report of an experiment — every diverged run with its step, cause, tripping
// value, last finite loss, first non-finite layer and learning rate, and how its configuration differs from
// the nearest run that converged; stability by setting; the largest stable learning rate per cell.
#pragma once

#include <string>

#include "analysis/results.h"

namespace fwlab {

std::string divergence_report(const ResultSet& results);

}  // namespace fwlab

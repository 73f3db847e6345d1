// Passkey heatmaps (`fwlab plot`): for every job of the table (and its reference stages) that ran a passkey task,
// accuracy over prompt length (x) and key depth (y), as LongLoRA's and LoLA's figures draw it.
#pragma once

#include <string>
#include <vector>

#include "analysis/plot.h"
#include "analysis/results.h"
#include "analysis/spec.h"

namespace fwlab {

std::vector<Figure> passkey_heatmaps(const ResultSet& results, const TableSpec& spec, const std::string& out_dir,
                                     const std::string& gnuplot);

}  // namespace fwlab

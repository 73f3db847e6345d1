// `fwlab plot`: figures drawn with gnuplot (PNG and SVG, plus the .gp script with its data inline, so a figure
// can be restyled without the database): learning curves per table row, a metric against state size m, and
// generation time and state memory against sequence length. Diverged runs are drawn and labelled, not dropped.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/results.h"
#include "analysis/spec.h"

namespace fwlab {

class PlotError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Figure {
  std::string name;                 // file stem: NAME.png, NAME.svg, NAME.gp
  std::vector<std::string> series;  // the legend entries
};

// Writes every figure of the experiment into `out_dir` and returns them. Throws PlotError when gnuplot fails or
// is missing. An empty `gnuplot`: the figures' names only, nothing written.
std::vector<Figure> make_plots(const ResultSet& results, const TableSpec& table, const std::vector<PlotSpec>& plots,
                               const std::string& out_dir, const std::string& gnuplot = "gnuplot");

}  // namespace fwlab

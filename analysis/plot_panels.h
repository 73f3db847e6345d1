// What analysis/plot.cpp's figures are made of, shared with the figures of their own files (plot_tokens.cpp): a
// panel's series and their rendering through gnuplot, and the jobs and labels of a table's cells.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "analysis/plot.h"

namespace fwlab::plotting {

// One line (or set of points) of a figure.
struct Series {
  std::string title;
  std::vector<std::array<double, 4>> points;  // x, y, ylow, yhigh (ylow/yhigh = y without error bars)
  bool dashed = false;
  std::optional<double> marker_x;  // a vertical dashed line (where the run diverged)
  std::vector<double> diverged_x;  // x of points with no value because every run diverged
  bool horizontal = false;         // a reference level drawn across the plot (first point's y)
  bool band = false;               // ylow..yhigh drawn as a shaded band (the spread over seeds), not as error bars
};

struct Panel {
  std::string title, xlabel, ylabel;
  bool logx = false, logy = false, xtics_at_points = false, x_from_zero = false;
  std::vector<Series> series;
};

// Writes NAME.gp (data inline) and renders it to NAME.png and NAME.svg in `out_dir`, panels side by side.
Figure render(const std::vector<Panel>& panels, const std::string& name, const std::string& out_dir,
              const std::string& gnuplot);
// A job's label by the settings `names` (axis values, "k=v" for numbers), as the table shows them.
std::string series_label(const TableSpec& spec, const JobRecord& j, const std::vector<std::string>& names);
// The applicable jobs of the table's stages.
std::vector<const JobRecord*> table_jobs(const ResultSet& results, const TableSpec& spec);

// [[plot]] kind = "vs_tokens" (analysis/plot_tokens.cpp): the metric against training tokens since the teacher.
Figure quality_per_token(const ResultSet& results, const TableSpec& spec, const PlotSpec& plot, size_t index,
                         const std::string& out_dir, const std::string& gnuplot);

}  // namespace fwlab::plotting

// Parts of an experiment's page (analysis/site.h) drawn from its table and results: the validation curves of a
// row's (or a column's) cells overlaid on one chart, and the divergence report's stability as bars.
#pragma once

#include <string>

#include "analysis/results.h"
#include "analysis/spec.h"
#include "analysis/table.h"

namespace fwlab {

// One inline SVG chart per table row (where the table has two or more columns) and per column (where it has two
// or more rows), each overlaying the validation curves of that row's or column's cells: one series per job, a
// diverged run crossed where it stopped, a log axis where the values span decades.
std::string cell_curves_html(const ResultSet& results, const TableSpec& spec, const Table& table);

// The share of diverged runs for each value of each setting that varies (report.h's stability_by_setting).
std::string stability_chart_html(const ResultSet& results);

}  // namespace fwlab

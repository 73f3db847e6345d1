// `fwlab table`: a paper table from the results database, laid out as the experiment file's [table] says, with
// the papers' markers (* diverged, N/A, – not run, … running) and their legend. Markdown, LaTeX (booktabs) and CSV
// come from one Table value; the same database always gives the same bytes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "analysis/results.h"
#include "analysis/spec.h"

namespace fwlab {

// What one cell shows, from the jobs that fall into it.
struct CellValue {
  enum class Kind { Value, NotApplicable, Diverged, NotRun, Running, Failed, Missing };
  Kind kind = Kind::NotRun;
  double mean = 0, sd = 0;
  int values = 0;  // runs that gave the shown value (the best group when reducing with "best")
  int runs = 0;    // applicable jobs in the cell
  int diverged = 0, failed = 0, unfinished = 0;
  int after_best = 0;  // diverged runs whose best checkpoint (validated before the divergence) gives the value
  std::string text;    // as printed
  std::vector<std::string> job_ids;  // the applicable jobs that fall into it (a page links the cell to them)
};

// The cell value of `jobs` for `metric`: "best" axes pick the group (jobs sharing their values) with the best
// mean, "mean" axes pool their runs into mean ± sd; diverged runs give no value but are counted.
CellValue reduce_cell(const std::vector<const JobRecord*>& jobs, const Metric& metric, const ResultSet& results,
                      const std::map<std::string, std::string>& reduce, int digits);

// A reference stage's jobs, and how its own axes other than `matched` reduce: as the table says, else best.
struct ReferenceJobs {
  std::vector<const JobRecord*> jobs;
  std::map<std::string, std::string> reduce;
};
ReferenceJobs reference_jobs(const ResultSet& results, const TableSpec& spec, const TableSpec::Reference& ref,
                             const std::vector<std::string>& matched = {});

struct Table {
  std::string title, caption;
  std::vector<std::string> row_headers;              // one per row axis
  std::vector<std::string> column_headers;           // one per value column
  std::vector<std::vector<std::string>> row_labels;  // [row][row axis]
  std::vector<std::vector<CellValue>> cells;         // [row][column]
  std::vector<std::string> row_keys;                 // [row]: the row axes' values joined by ", " ("" for references)
  std::vector<std::string> column_keys, column_metrics;  // [column]: the column axes' values joined by ", ", the metric
  std::vector<std::string> notes;                        // reference values that share no column axis
  std::vector<std::string> legend;
};

Table build_table(const ResultSet& results, const TableSpec& spec);

std::string render_markdown(const Table& t);
std::string render_latex(const Table& t);
std::string render_csv(const Table& t);
// One CSV field: quoted when it must be, and a text cell a spreadsheet would run as a formula gets a leading
// apostrophe (fwlab query --format csv writes its cells through it too).
std::string csv_field(const std::string& text);

}  // namespace fwlab

// `fwlab table --compare`: the regenerated table beside the paper's own numbers ([published] in the experiment
// file) and how far they agree — pairwise orderings within rows, within columns and overall, a rank correlation,
// the divergence and N/A marks, and the cells whose ranks differ most. At reduced scale the perplexities cannot
// match; the orderings are what a reproduction can show.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "analysis/spec.h"
#include "analysis/table.h"

namespace fwlab {

// Pairs of cells the paper orders (different values) where fwlab has both values. Where fwlab's cells carry a
// spread (several seeds), a pair counts only where the spread separates them: |mean_a - mean_b| > sd_a + sd_b
// (their mean ± sd intervals do not overlap); the rest are `noise`, counted apart, agreeing or not.
struct Agreement {
  int agree = 0, pairs = 0;
  int noise = 0;
};

struct Comparison {
  std::string title, caption;
  std::vector<std::string> row_headers, column_headers;
  std::vector<std::vector<std::string>> row_labels, cells;  // cells: "fwlab / paper"
  Agreement within_rows, within_columns, overall;
  std::optional<double> spearman;  // rank correlation over the cells where both have a value (3 or more)
  int ranked = 0;
  bool spreads = false;              // some compared cell pools several runs (mean ± sd)
  std::vector<std::string> marks;    // how the divergence and N/A marks compare
  std::vector<std::string> largest;  // the cells whose ranks differ most
};

Comparison compare_with_published(const Table& table, const PublishedSpec& published);
std::string render_comparison(const Comparison& c);

// Spearman's rank correlation of two equally long samples (average ranks for ties); nullopt below 3 values or
// when either sample is constant.
std::optional<double> spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace fwlab

#include "analysis/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

namespace fwlab {

namespace {

std::vector<double> average_ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> rank(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    for (size_t k = i; k <= j; ++k) rank[order[k]] = 0.5 * static_cast<double>(i + j) + 1.0;
    i = j + 1;
  }
  return rank;
}

std::string number_text(double v) { return fmt::format("{:g}", v); }

std::string published_text(const PublishedCell& c) {
  switch (c.kind) {
    case PublishedCell::Kind::Value:
      return number_text(c.value);
    case PublishedCell::Kind::Diverged:
      return "*";
    case PublishedCell::Kind::NotApplicable:
      return "N/A";
    case PublishedCell::Kind::NotReported:
      return "–";
  }
  return "";
}

std::string share(const Agreement& a) {
  return a.pairs == 0 ? "no pairs" : fmt::format("{}/{} ({:.0f}%)", a.agree, a.pairs, 100.0 * a.agree / a.pairs);
}

// One compared cell: where it is, and both values when both have one.
struct Pair {
  size_t row, column;
  std::string name;
  const CellValue* ours;
  PublishedCell paper;
  bool comparable() const {
    return ours && ours->kind == CellValue::Kind::Value && paper.kind == PublishedCell::Kind::Value;
  }
};

void add_mark_lines(const std::vector<Pair>& cells, PublishedCell::Kind paper_kind, CellValue::Kind our_kind,
                    const char* what, std::vector<std::string>& out) {
  std::vector<std::string> both, paper_only, ours_only;
  for (const auto& c : cells) {
    const bool p = c.paper.kind == paper_kind, o = c.ours && c.ours->kind == our_kind;
    if (p && o)
      both.push_back(c.name);
    else if (p)
      paper_only.push_back(fmt::format("{} (fwlab: {})", c.name, c.ours ? c.ours->text : "not in the table"));
    else if (o)
      ours_only.push_back(fmt::format("{} (paper: {})", c.name, published_text(c.paper)));
  }
  if (both.empty() && paper_only.empty() && ours_only.empty()) return;
  out.push_back(fmt::format("{}: both {}{}{}", what, both.empty() ? "none" : fmt::format("{}", fmt::join(both, "; ")),
                            paper_only.empty() ? "" : fmt::format("; the paper only: {}", fmt::join(paper_only, "; ")),
                            ours_only.empty() ? "" : fmt::format("; fwlab only: {}", fmt::join(ours_only, "; "))));
}

constexpr size_t kAbsent = static_cast<size_t>(-1);

// Per published column: the table's value column of the compared metric (or kAbsent); fills the comparison's
// column headers and names, in its caption, the metric columns this table does not measure.
std::vector<size_t> match_columns(const Table& t, const PublishedSpec& pub, Comparison& c) {
  std::vector<size_t> columns;
  std::vector<std::string> unmeasured;
  for (size_t j = 0; j < pub.columns.size(); ++j) {
    const auto& key = pub.columns[j];
    const auto& metric = pub.metric_columns.empty() ? pub.metric.name : pub.metric_columns[j].name;
    columns.push_back(kAbsent);
    for (size_t i = 0; i < t.column_keys.size() && columns.back() == kAbsent; ++i)
      if (t.column_metrics[i] == metric && (key.empty() || t.column_keys[i] == key)) columns.back() = i;
    c.column_headers.push_back(columns.back() != kAbsent ? t.column_headers[columns.back()]
                               : key.empty()             ? metric
                                                         : key);
    if (columns.back() == kAbsent && !pub.metric_columns.empty()) unmeasured.push_back(metric);
  }
  if (!unmeasured.empty()) c.caption += fmt::format(" Not measured in this table: {}.", fmt::join(unmeasured, ", "));
  return columns;
}

}  // namespace

std::optional<double> spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() < 3 || a.size() != b.size()) return std::nullopt;
  const auto ra = average_ranks(a), rb = average_ranks(b);
  const double n = static_cast<double>(a.size()), mean = (n + 1) / 2;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - mean) * (rb[i] - mean);
    saa += (ra[i] - mean) * (ra[i] - mean);
    sbb += (rb[i] - mean) * (rb[i] - mean);
  }
  if (saa == 0 || sbb == 0) return std::nullopt;
  return sab / std::sqrt(saa * sbb);
}

namespace {

// Every pair of comparable cells: does fwlab order it as the paper does (within one row, one column, overall)?
// A pair whose gap is within the two cells' spreads counts as noise, not as an agreement or a disagreement.
void count_pair_orders(const std::vector<const Pair*>& both, Comparison& c) {
  for (size_t i = 0; i < both.size(); ++i)
    for (size_t j = i + 1; j < both.size(); ++j) {
      const double paper = both[i]->paper.value - both[j]->paper.value,
                   ours = both[i]->ours->mean - both[j]->ours->mean;
      if (paper == 0) continue;  // a tie in the paper orders nothing
      const bool agree = (paper > 0 && ours > 0) || (paper < 0 && ours < 0);
      const bool noise = std::fabs(ours) <= both[i]->ours->sd + both[j]->ours->sd &&
                         (both[i]->ours->values > 1 || both[j]->ours->values > 1);
      for (auto* a : {&c.overall, both[i]->row == both[j]->row ? &c.within_rows : nullptr,
                      both[i]->column == both[j]->column ? &c.within_columns : nullptr})
        if (a && noise)
          a->noise += 1;
        else if (a)
          a->pairs += 1, a->agree += agree ? 1 : 0;
    }
}

// The (at most three) cells whose ranks differ most between fwlab and the paper (rank 1 = best).
void add_largest_rank_gaps(const std::vector<const Pair*>& both, const PublishedSpec& pub, Comparison& c) {
  if (both.size() < 3) return;
  const auto sign = pub.higher_is_better ? -1.0 : 1.0;
  std::vector<double> o, p;
  for (const auto* x : both) o.push_back(sign * x->ours->mean), p.push_back(sign * x->paper.value);
  const auto ro = average_ranks(o), rp = average_ranks(p);
  std::vector<size_t> order(both.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return std::fabs(ro[a] - rp[a]) > std::fabs(ro[b] - rp[b]); });
  for (size_t k = 0; k < std::min<size_t>(3, order.size()); ++k) {
    const size_t i = order[k];
    if (ro[i] == rp[i]) break;
    c.largest.push_back(fmt::format("{}: fwlab {} (rank {:g} of {}), paper {} (rank {:g})", both[i]->name,
                                    both[i]->ours->text, ro[i], both.size(), number_text(both[i]->paper.value), rp[i]));
  }
}

}  // namespace

Comparison compare_with_published(const Table& t, const PublishedSpec& pub) {
  Comparison c;
  c.title = fmt::format("{} against {}", t.title, pub.source);
  const auto units = pub.metric_columns.empty() ? pub.metric.units() : std::string("each column's metric");
  c.caption =
      fmt::format("Cells: fwlab / the paper, {} ({} is better){}.", units, pub.higher_is_better ? "higher" : "lower",
                  pub.note.empty() ? "" : fmt::format(". {}", pub.note));
  c.row_headers = t.row_headers;
  const auto columns = match_columns(t, pub, c);
  std::vector<Pair> cells;
  std::vector<std::string> rows_seen;
  std::map<std::string, int> label_uses;  // rows whose labels coincide (two "Gated" rows told apart by m) get their key
  for (const auto& labels : t.row_labels) ++label_uses[fmt::format("{}", fmt::join(labels, ", "))];
  const auto add_row = [&](std::vector<std::string> labels, const std::string& key,
                           const std::vector<CellValue>* ours) {
    const auto it = pub.rows.find(key);
    if (it == pub.rows.end()) return;
    rows_seen.push_back(key);
    if (!labels.empty() && label_uses[fmt::format("{}", fmt::join(labels, ", "))] > 1)
      labels.back() += fmt::format(" ({})", key);
    c.row_labels.push_back(labels);
    std::vector<std::string> texts;
    for (size_t j = 0; j < pub.columns.size(); ++j) {
      const CellValue* mine = ours && columns[j] != kAbsent ? &(*ours)[columns[j]] : nullptr;
      const auto name = pub.columns[j].empty() && pub.metric_columns.empty()
                            ? fmt::format("{}", fmt::join(labels, ", "))
                            : fmt::format("{}, {}", fmt::join(labels, ", "), c.column_headers[j]);
      cells.push_back({c.row_labels.size() - 1, j, name, mine, it->second[j]});
      texts.push_back(fmt::format("{} / {}", mine ? mine->text : "–", published_text(it->second[j])));
    }
    c.cells.push_back(texts);
  };
  for (size_t r = 0; r < t.cells.size(); ++r) {  // a reference row (row key "") is found by its label
    const auto& key = t.row_keys[r].empty() && !t.row_labels[r].empty() ? t.row_labels[r][0] : t.row_keys[r];
    if (!key.empty()) add_row(t.row_labels[r], key, &t.cells[r]);
  }
  for (const auto& [key, values] : pub.rows)  // published rows the regenerated table does not have (not run)
    if (std::find(rows_seen.begin(), rows_seen.end(), key) == rows_seen.end()) {
      std::vector<std::string> labels(t.row_headers.size(), "");
      if (!labels.empty()) labels[0] = key;
      add_row(labels, key, nullptr);
    }

  std::vector<const Pair*> both;
  for (const auto& p : cells)
    if (p.comparable()) both.push_back(&p);
  count_pair_orders(both, c);
  std::vector<double> ours, paper;
  for (const auto* p : both)
    ours.push_back(p->ours->mean), paper.push_back(p->paper.value), c.spreads |= p->ours->values > 1;
  c.ranked = static_cast<int>(both.size());
  c.spearman = spearman(ours, paper);

  add_mark_lines(cells, PublishedCell::Kind::Diverged, CellValue::Kind::Diverged, "Diverged (*)", c.marks);
  add_mark_lines(cells, PublishedCell::Kind::NotApplicable, CellValue::Kind::NotApplicable, "N/A", c.marks);

  add_largest_rank_gaps(both, pub, c);
  return c;
}

std::string render_comparison(const Comparison& c) {
  std::string out = fmt::format("### {}\n\n{}\n\n", c.title, c.caption);
  std::vector<std::string> header = c.row_headers, align(c.row_headers.size(), ":---");
  for (const auto& h : c.column_headers) header.push_back(h), align.push_back("---:");
  out += fmt::format("| {} |\n| {} |\n", fmt::join(header, " | "), fmt::join(align, " | "));
  for (size_t r = 0; r < c.cells.size(); ++r) {
    std::vector<std::string> line = c.row_labels[r];
    line.insert(line.end(), c.cells[r].begin(), c.cells[r].end());
    out += fmt::format("| {} |\n", fmt::join(line, " | "));
  }
  if (!c.spreads) {
    out += fmt::format(
        "\nOrderings that agree (pairs of cells the paper orders, both with a value): within rows {}, within columns "
        "{}, overall {}.\n",
        share(c.within_rows), share(c.within_columns), share(c.overall));
  } else {
    out += fmt::format(
        "\nOrderings that agree (pairs of cells the paper orders, both with a value, and fwlab's mean ± sd intervals "
        "apart): "
        "within rows {}, within columns {}, overall {}.\n",
        share(c.within_rows), share(c.within_columns), share(c.overall));
    out += fmt::format(
        "Within noise (fwlab's mean ± sd intervals overlap: counted apart, neither agreeing nor disagreeing): within "
        "rows {}, "
        "within columns {}, overall {}.\n",
        c.within_rows.noise, c.within_columns.noise, c.overall.noise);
  }
  out += c.spearman ? fmt::format("Spearman rank correlation over the {} cells with both values: {:.2f}.\n", c.ranked,
                                  *c.spearman)
                    : fmt::format("Spearman rank correlation: not defined ({} cells with both values).\n", c.ranked);
  for (const auto& m : c.marks) out += fmt::format("\n{}.\n", m);
  if (!c.largest.empty()) out += fmt::format("\nLargest rank differences: {}.\n", fmt::join(c.largest, "; "));
  return out;
}

}  // namespace fwlab

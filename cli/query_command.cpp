// `fwlab query`: read-only SQL on the results database, printed as a table, CSV or JSON.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "analysis/table.h"
#include "cli/commands.h"
#include "harness/db.h"

namespace fwlab::cli {

namespace {

struct QueryResult {
  std::vector<std::string> names;
  std::vector<std::vector<nlohmann::json>> rows;
};

void print_query_result(const QueryResult& r, const std::string& format) {
  auto cell = [](const nlohmann::json& v) {
    return v.is_string() ? v.get<std::string>() : v.is_null() ? std::string() : v.dump();
  };
  if (format == "csv") {
    const auto quote = csv_field;
    std::vector<std::string> fields;
    for (const auto& n : r.names) fields.push_back(quote(n));
    fmt::print("{}\n", fmt::join(fields, ","));
    for (const auto& row : r.rows) {
      fields.clear();
      for (const auto& v : row) fields.push_back(quote(cell(v)));
      fmt::print("{}\n", fmt::join(fields, ","));
    }
    return;
  }
  std::vector<size_t> width(r.names.size());
  for (size_t i = 0; i < r.names.size(); ++i) width[i] = r.names[i].size();
  for (const auto& row : r.rows)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], std::min<size_t>(60, cell(row[i]).size()));
  // A cell longer than 60 characters is cut there and ends in "…" (--format csv or json prints it whole).
  const auto fitted = [](const std::string& text) { return text.size() <= 60 ? text : text.substr(0, 59) + "…"; };
  auto print_row = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t i = 0; i < cells.size(); ++i) {
      const auto text = fitted(cells[i]);
      const size_t shown = text.size() > 60 ? 60 : text.size();  // "…" is three bytes but one column
      line += fmt::format("{}{}{}", i ? "  " : "", text, std::string(width[i] > shown ? width[i] - shown : 0, ' '));
    }
    fmt::print("{}\n", line);
  };
  print_row(r.names);
  std::vector<std::string> rule;
  for (auto w : width) rule.push_back(std::string(w, '-'));
  print_row(rule);
  for (const auto& row : r.rows) {
    std::vector<std::string> cells;
    for (const auto& v : row) cells.push_back(cell(v));
    print_row(cells);
  }
}

// A text value holding a JSON object or array (a job's config, its cell) is emitted as JSON, not as a string
// of JSON; any other text stays a string.
nlohmann::json nested(const nlohmann::json& v) {
  if (!v.is_string()) return v;
  const auto& text = v.get_ref<const std::string&>();
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || (text[first] != '{' && text[first] != '[')) return v;
  auto parsed = nlohmann::json::parse(text, nullptr, false);
  return parsed.is_discarded() ? v : parsed;
}

nlohmann::json query_json(const QueryResult& r) {
  auto out = nlohmann::json::array();
  for (const auto& row : r.rows) {
    nlohmann::json o = nlohmann::json::object();
    for (size_t i = 0; i < r.names.size(); ++i) o[r.names[i]] = nested(row[i]);
    out.push_back(o);
  }
  return out;
}

}  // namespace

// Every statement of `sql` runs, or none: a statement that would write rejects the whole query.
int cmd_query(const std::string& sql, const std::string& format, const Common& c) {
  Db db(c.db_path, true);
  std::vector<QueryResult> results;
  try {
    for (auto& q : db.prepare_read_only(sql)) {
      QueryResult r;
      for (int i = 0; i < q.columns(); ++i) r.names.push_back(q.name(i));
      while (q.step()) {
        std::vector<nlohmann::json> row;
        for (int i = 0; i < q.columns(); ++i) row.push_back(q.value(i));
        r.rows.push_back(std::move(row));
      }
      results.push_back(std::move(r));
    }
  } catch (const DbError& e) {
    fmt::print(stderr, "fwlab: query: {}\n", e.what());
    return 2;
  }
  if (format == "json") {  // one statement: its rows; several: one array of rows per statement
    auto out = nlohmann::json::array();
    for (const auto& r : results) out.push_back(query_json(r));
    fmt::print("{}\n", (results.size() == 1 ? out[0] : out).dump(2));
    return 0;
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (i) fmt::print("\n");
    print_query_result(results[i], format);
  }
  return 0;
}

}  // namespace fwlab::cli

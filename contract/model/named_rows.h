// Lookups shared by the tables and the registries of rules and feature maps (rows with a `name`).
#pragma once

#include <string>
#include <vector>

namespace fwlab {

template <typename Row>
const Row* find_named_row(const std::vector<Row>& rows, const std::string& name) {
  for (const auto& row : rows)
    if (row.name == name) return &row;
  return nullptr;
}

template <typename Row>
std::vector<std::string> row_names(const std::vector<Row>& rows) {
  std::vector<std::string> names;
  for (const auto& row : rows) names.push_back(row.name);
  return names;
}

}  // namespace fwlab

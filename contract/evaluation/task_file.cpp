// Reading task files: JSONL documents, each checked by its adapter with errors at file, line and field.
#include <fmt/format.h>

#include <fstream>

#include "contract/evaluation/eval_task.h"

namespace fwlab {

TaskFileError::TaskFileError(const std::string& file, int64_t line, const std::string& field,
                             const std::string& message)
    : DataError(line > 0 ? fmt::format("{}:{}: {}: {}", file, line, field, message)
                         : fmt::format("{}: {}", file, message)) {}

void DocFields::fail(const std::string& field, const std::string& message) const {
  throw TaskFileError(file_, line_, field, message);
}

const nlohmann::json& DocFields::member(const std::string& field) const {
  const auto dot = field.find('.');  // "choices.text": a member of a member, as ARC's documents nest them
  const auto& outer = dot == std::string::npos ? doc_ : member(field.substr(0, dot));
  const auto name = dot == std::string::npos ? field : field.substr(dot + 1);
  if (!outer.is_object()) fail(field.substr(0, dot), fmt::format("must be an object, got {}", outer.dump()));
  const auto it = outer.find(name);
  if (it == outer.end()) fail(field, "missing");
  return *it;
}

std::string DocFields::text(const std::string& field) const {
  const auto& v = member(field);
  if (!v.is_string()) fail(field, fmt::format("must be a string, got {}", v.dump()));
  return v.get<std::string>();
}

std::string DocFields::nonempty_text(const std::string& field) const {
  auto s = text(field);
  if (s.empty()) fail(field, "is empty");
  return s;
}

int64_t DocFields::integer(const std::string& field) const {
  const auto& v = member(field);
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_string()) {  // HellaSwag and Winogrande store labels as strings ("2")
    const auto s = v.get<std::string>();
    size_t used = 0;
    try {
      const auto n = std::stoll(s, &used);
      if (used == s.size()) return n;
    } catch (const std::exception&) {
    }
  }
  fail(field, fmt::format("must be an integer, got {}", v.dump()));
}

int64_t DocFields::index(const std::string& field, int64_t n, int64_t first) const {
  const auto i = integer(field) - first;
  if (i < 0 || i >= n) fail(field, fmt::format("gold {} is out of range: {} choices", i + first, n));
  return i;
}

int64_t DocFields::index_of(const std::string& field, const std::vector<std::string>& labels) const {
  const auto v = text(field);
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] == v) return static_cast<int64_t>(i);
  fail(field, fmt::format("'{}' is none of the {} choice labels", v, labels.size()));
}

std::vector<std::string> DocFields::choices(const std::string& field) const {
  auto out = texts(field);
  for (size_t i = 0; i < out.size(); ++i)  // an empty continuation would score log 1 = 0, the best possible score
    if (out[i].empty()) fail(field, fmt::format("choice {} is empty", i));
  return out;
}

std::vector<std::string> DocFields::texts(const std::string& field) const {
  const auto& v = member(field);
  if (!v.is_array() || v.empty()) fail(field, fmt::format("must be a non-empty list of strings, got {}", v.dump()));
  std::vector<std::string> out;
  for (const auto& e : v) {
    if (!e.is_string()) fail(field, fmt::format("must be a list of strings, got {}", e.dump()));
    out.push_back(e.get<std::string>());
  }
  return out;
}

std::vector<EvalDoc> read_task_file(const std::string& path, const TaskAdapter& adapter, int64_t limit) {
  if (!adapter.read)
    throw TaskFileError(path, 0, "", fmt::format("task {} is generated and reads no file", adapter.name));
  std::ifstream in(path);
  if (!in) throw TaskFileError(path, 0, "", "cannot be read");
  std::vector<EvalDoc> docs;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw TaskFileError(path, number, "(document)", "not a JSON object");
    const DocFields fields(j, path, number);
    auto doc = adapter.read(fields);
    doc.line = number;
    docs.push_back(std::move(doc));
    if (limit > 0 && static_cast<int64_t>(docs.size()) >= limit) break;
  }
  if (docs.empty()) throw TaskFileError(path, 0, "", "holds no document");
  return docs;
}

}  // namespace fwlab

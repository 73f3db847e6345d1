#include "text/tokenizers/hf_json_file.h"

#include <fmt/format.h>

#include <fstream>

namespace fwlab {

void JsonPlace::fail(const std::string& message) const {
  throw DataError(key.empty() ? fmt::format("{}: {}", file, message) : fmt::format("{}: {}: {}", file, key, message));
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(fmt::format("{}: cannot open", path));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {  // e.byte: where the damage is, counted from 1
    throw DataError(fmt::format("{}: not valid JSON at byte {}: {}", path, e.byte, e.what()));
  } catch (const nlohmann::json::exception& e) {  // e.g. a number too large for any type
    throw DataError(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
}

std::string json_excerpt(const nlohmann::json& value) {
  auto text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() <= 80) return text;
  size_t cut = 77;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
  return text.substr(0, cut) + "...";
}

const nlohmann::json* json_member(const nlohmann::json& obj, const char* name) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(name);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

bool json_bool(const nlohmann::json& obj, const char* name, bool fallback, const JsonPlace& at) {
  const auto* v = json_member(obj, name);
  if (!v) return fallback;
  if (!v->is_boolean()) (at / name).fail(fmt::format("expected true or false, got {}", json_excerpt(*v)));
  return v->get<bool>();
}

std::string json_string(const nlohmann::json& obj, const char* name, const std::string& fallback, const JsonPlace& at) {
  const auto* v = json_member(obj, name);
  if (!v) return fallback;
  if (!v->is_string()) (at / name).fail(fmt::format("expected a string, got {}", json_excerpt(*v)));
  return v->get<std::string>();
}

std::string json_type(const nlohmann::json& component, const JsonPlace& at) {
  if (!component.is_object()) at.fail(fmt::format("expected an object, got {}", json_excerpt(component)));
  const auto* type = json_member(component, "type");
  if (!type || !type->is_string()) (at / "type").fail("missing (a component names its type)");
  return type->get<std::string>();
}

}  // namespace fwlab

// Reading Hugging Face's tokenizer files (tokenizer.json, tokenizer_config.json) with errors that name the file
// and the key at fault ("DIR/tokenizer.json: model.merges[3]: ..."), as DataError: the worker exits 2 on them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "contract/formats/corpus_files.h"

namespace fwlab {

// Where a JSON value sits: its file and its key path ("pre_tokenizer.pretokenizers[1].pattern").
struct JsonPlace {
  std::string file, key;

  JsonPlace operator/(const std::string& member) const { return {file, key.empty() ? member : key + "." + member}; }
  JsonPlace operator[](size_t index) const { return {file, key + "[" + std::to_string(index) + "]"}; }
  [[noreturn]] void fail(const std::string& message) const;
};

// The whole file as JSON; a damaged file is refused with the byte offset of the damage.
nlohmann::json read_json_file(const std::string& path);

// obj[name], or nullptr when the member is absent or null (both mean "not set" in these files).
const nlohmann::json* json_member(const nlohmann::json& obj, const char* name);

// Typed members with a default for "not set"; a value of another type fails naming the key.
bool json_bool(const nlohmann::json& obj, const char* name, bool fallback, const JsonPlace& at);
std::string json_string(const nlohmann::json& obj, const char* name, const std::string& fallback, const JsonPlace& at);

// A value as JSON text, cut to about 80 characters (an error message should not quote a whole vocabulary).
std::string json_excerpt(const nlohmann::json& value);

// The "type" of a component object ("Split", "NFC", ...); fails when it is not an object with a string type.
std::string json_type(const nlohmann::json& component, const JsonPlace& at);

}  // namespace fwlab

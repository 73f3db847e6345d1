#include "text/tokenizers/hf_tokenizer_config.h"

#include <fmt/format.h>

#include <filesystem>

#include "text/tokenizers/hf_json_file.h"

namespace fwlab {

namespace {

// A token entry: a string, an AddedToken object {"content": ...}, or null.
std::optional<std::string> token_text(const nlohmann::json& config, const char* key, const JsonPlace& at) {
  const auto* v = json_member(config, key);
  if (!v) return std::nullopt;
  if (v->is_string()) return v->get<std::string>();
  if (const auto* content = json_member(*v, "content"); content && content->is_string())
    return content->get<std::string>();
  (at / key).fail(fmt::format("expected a token (a string or {{\"content\": ...}}), got {}", json_excerpt(*v)));
}

}  // namespace

TokenizerConfig read_tokenizer_config(const std::string& path) {
  TokenizerConfig c;
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(path, ec)) return c;
  const auto j = read_json_file(path);
  const JsonPlace at{path, ""};
  if (!j.is_object()) at.fail("expected a JSON object");
  c.sets_special = j.contains("add_bos_token") || j.contains("add_eos_token");
  c.add_bos = json_bool(j, "add_bos_token", false, at);
  c.add_eos = json_bool(j, "add_eos_token", false, at);
  c.bos_token = token_text(j, "bos_token", at);
  c.eos_token = token_text(j, "eos_token", at);
  return c;
}

}  // namespace fwlab

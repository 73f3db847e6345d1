// tokenizer_config.json: the keys that change which ids a text gets (add_bos_token, add_eos_token and the tokens
// they name). Everything else in it (chat templates, model_max_length, ...) does not enter fwlab's token files.
#pragma once

#include <optional>
#include <string>

namespace fwlab {

struct TokenizerConfig {
  bool sets_special = false;              // add_bos_token or add_eos_token is present (either one decides both ends)
  bool add_bos = false, add_eos = false;  // an absent key or null counts as false
  std::optional<std::string> bos_token, eos_token;  // "..." or {"content": "..."}; nullopt: absent or null
};

// `path` "" or a file that does not exist: no settings (nothing added by the config). Throws DataError naming the
// file and key for damaged JSON or a key of the wrong type.
TokenizerConfig read_tokenizer_config(const std::string& path);

}  // namespace fwlab

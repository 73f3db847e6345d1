// Hugging Face tokenizer directories (`data.tokenizer = "hf:DIR"`): DIR/tokenizer.json when it is there (Llama 3,
// Qwen2, SmolLM / GPT-2), else DIR/tokenizer.model (SentencePiece: Llama 2, Mistral); DIR/tokenizer_config.json
// when there, for add_bos_token / add_eos_token.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "text/tokenizers/tokenizer.h"

namespace fwlab {

// The tokenizer of `dir`; its name() is "hf:" + dir. Throws DataError naming the file and key at fault (a missing
// directory, neither tokenizer file, damaged JSON, unsupported components).
std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& dir);

// The files that decide its ids (what the token cache's key hashes): the tokenizer file and, when there,
// tokenizer_config.json. Throws DataError as load_hf_tokenizer does when there is no tokenizer file.
std::vector<std::filesystem::path> hf_tokenizer_files(const std::string& dir);

}  // namespace fwlab

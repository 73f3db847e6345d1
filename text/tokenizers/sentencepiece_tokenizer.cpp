#include "text/tokenizers/sentencepiece_tokenizer.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "contract/formats/corpus_files.h"
#include "text/tokenizers/hf_pretokenizer.h"
#include "text/tokenizers/hf_tokenizer_config.h"

namespace fwlab {

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_file, const std::string& config_json,
                                               std::string name)
    : name_(std::move(name)) {
  try {
    model_ = std::make_unique<SentencePieceModel>(model_file.c_str());
  } catch (const std::runtime_error& e) {
    throw DataError(fmt::format("{}: {}", model_file, e.what()));
  }
  const auto config = read_tokenizer_config(config_json);
  if (config.add_bos) before_.push_back(special_id(config.bos_token, model_->bos_id(), config_json, "bos_token"));
  if (config.add_eos) after_.push_back(special_id(config.eos_token, model_->eos_id(), config_json, "eos_token"));
}

// The config's token when it names one (it must be a piece of the model), else the model's own BOS / EOS.
int SentencePieceTokenizer::special_id(const std::optional<std::string>& token, int model_id,
                                       const std::string& config_json, const char* key) const {
  if (token) {
    const int id = model_->piece_to_id(token->data(), token->size());
    if (id < 0 || (model_->is_unknown(id) && id != model_id))
      throw DataError(fmt::format("{}: {}: {} is not a piece of the SentencePiece model", config_json, key,
                                  nlohmann::json(*token).dump()));
    return id;
  }
  if (model_id < 0)
    throw DataError(
        fmt::format("{}: add_{}: the SentencePiece model has no such token and {} is not set", config_json, key, key));
  return model_id;
}

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view input, bool add_special_tokens) const {
  const auto repaired = repair_utf8(input);  // as for tokenizer.json: ill-formed bytes become U+FFFD
  const std::string_view text = repaired ? std::string_view(*repaired) : input;
  std::vector<int> pieces;
  try {
    pieces = model_->encode(text.data(), text.size());
  } catch (const std::runtime_error& e) {
    throw DataError(fmt::format("{}: {}", name_, e.what()));
  }
  std::vector<int32_t> ids(add_special_tokens ? before_ : std::vector<int32_t>{});
  ids.insert(ids.end(), pieces.begin(), pieces.end());
  if (add_special_tokens) ids.insert(ids.end(), after_.begin(), after_.end());
  return ids;
}

std::string SentencePieceTokenizer::decode(const std::vector<int32_t>& ids) const {
  const auto bytes = model_->decode(std::vector<int>(ids.begin(), ids.end()));
  return {bytes.begin(), bytes.end()};
}

}  // namespace fwlab

// A SentencePiece tokenizer.model (Llama 2, Mistral) read by the SentencePiece library. BOS / EOS are added only
// as tokenizer_config.json's add_bos_token / add_eos_token say: an absent file or key adds nothing (the model
// file itself says nothing about them; transformers' class defaults are an assumption fwlab does not make).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "text/tokenizers/sentencepiece_model.h"
#include "text/tokenizers/tokenizer.h"

namespace fwlab {

class SentencePieceTokenizer : public Tokenizer {
 public:
  // Throws DataError naming the file (and the config key) at fault.
  SentencePieceTokenizer(const std::string& model_file, const std::string& config_json, std::string name);

  std::vector<int32_t> encode(std::string_view text) const override { return encode(text, true); }
  std::vector<int32_t> encode_plain(std::string_view text) const override { return encode(text, false); }
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return model_->piece_size(); }
  std::string name() const override { return name_; }

 private:
  int special_id(const std::optional<std::string>& token, int model_id, const std::string& config_json,
                 const char* key) const;

  std::unique_ptr<SentencePieceModel> model_;
  std::string name_;
  std::vector<int32_t> before_, after_;  // BOS / EOS as the config asks
};

}  // namespace fwlab

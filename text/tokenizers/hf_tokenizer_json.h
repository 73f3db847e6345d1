// A Hugging Face tokenizer.json (byte-level BPE as Llama 3, Qwen2 and SmolLM / GPT-2 ship it; SentencePiece-style
// BPE with byte fallback and Metaspace as Llama 2, Mistral, TinyLlama and Gemma ship it), encoding as the
// tokenizers library's encode(text, add_special_tokens = true) does:
//   1. added tokens are split out (normalized = false ones in the raw text, then the rest is normalized, then
//      normalized = true ones);
//   2. the pre-tokenizer splits what remains; 3. the BPE model encodes each piece;
//   4. the post-processor adds special tokens, unless tokenizer_config.json has add_bos_token / add_eos_token:
//      then [bos] $A [eos] as those keys say (transformers' update_post_processor; tests/python/hf_tokenizer.py).
// Supported and refused (by file and key): see worker/README.md, "Tokenizers".
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "text/tokenizers/hf_added_tokens.h"
#include "text/tokenizers/hf_bpe_model.h"
#include "text/tokenizers/hf_decoder.h"
#include "text/tokenizers/hf_pretokenizer.h"
#include "text/tokenizers/hf_tokenizer_config.h"
#include "text/tokenizers/tokenizer.h"

namespace fwlab {

class HfJsonTokenizer : public Tokenizer {
 public:
  // `config_json` "" or missing: no tokenizer_config.json. `name`: what name() reports ("hf:DIR").
  // Throws DataError naming the file and key at fault.
  HfJsonTokenizer(const std::string& tokenizer_json, const std::string& config_json, std::string name);

  std::vector<int32_t> encode(std::string_view text) const override { return encode(text, true); }
  std::vector<int32_t> encode_plain(std::string_view text) const override { return encode(text, false); }
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // The decoder's text (text/tokenizers/hf_decoder.h; ids the vocabulary lacks are skipped, as tokenizers does); a
  // ByteLevel decoder's bytes are not forced to valid UTF-8, so that pieces of a text decode to pieces of its bytes.
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return vocab_size_; }  // max id + 1 over the vocab and added tokens
  std::string name() const override { return name_; }

  std::optional<int32_t> token_to_id(const std::string& token) const;

  // One template of the post-processor: special-token ids around the sequence ("single" of TemplateProcessing).
  struct Template {
    std::vector<int32_t> before, after;
  };

 private:
  void read_post_processor(const nlohmann::json* spec, const JsonPlace& at);
  void apply_config(const TokenizerConfig& config, const std::string& config_json);
  void check_special_ids(const std::string& file) const;

  std::string name_;
  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<AddedVocabulary> added_;
  std::vector<Template> post_;  // applied in order (a Sequence of processors)
  Decoder decoder_;
  int64_t vocab_size_ = 0;
};

}  // namespace fwlab

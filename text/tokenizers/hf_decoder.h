// The decoder of a Hugging Face tokenizer.json: the chain that turns a sequence of tokens back into text
// (tokenizers' Decoder::decode = decode_chain(tokens).join("")). Byte-level files (GPT-2, Llama 3, Qwen2) use
// ByteLevel; SentencePiece-style files (Llama 2, Mistral, TinyLlama, Gemma) use Metaspace, or a Sequence of
// Replace ("▁" -> " "), ByteFallback (<0xXX> tokens back to bytes), Fuse and Strip. Others are refused at load, so
// that a tokenizer that cannot give text back is never used to make token files that must be read again.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "text/tokenizers/hf_json_file.h"

namespace fwlab {

class Decoder {
 public:
  // `spec` null: no decoder (tokens joined by spaces, as tokenizers does). Throws DataError naming the file and key.
  static Decoder from_json(const nlohmann::json* spec, const JsonPlace& at);
  std::string decode(std::vector<std::string> tokens) const;

  struct Step {
    enum class Kind { byte_level, metaspace, replace, byte_fallback, fuse, strip } kind;
    std::string from, to;     // replace: every `from` in a token becomes `to`; metaspace: the replacement character
    bool drop_first = false;  // metaspace: the first token loses its replacement characters (prepend_scheme != never)
    size_t start = 0, stop = 0;  // strip: at most this many `from` characters cut from each end of every token
  };

 private:
  bool present_ = false;
  std::vector<Step> steps_;
};

}  // namespace fwlab

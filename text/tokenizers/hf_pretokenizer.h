// The text stages of a Hugging Face tokenizer.json before its model: the normalizer, the pre-tokenizer (regex
// Split, ByteLevel) and GPT-2's byte-level alphabet. Regex patterns in these files are written for Oniguruma;
// ICU's regex engine reads the constructs they use (\p{L}, \p{N}, (?i:...), possessive quantifiers, lookahead,
// \s as Unicode White_Space), so the patterns are compiled as they are.
#pragma once

#include <unicode/uversion.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizers/hf_json_file.h"

U_NAMESPACE_BEGIN
class RegexPattern;
U_NAMESPACE_END

namespace fwlab {

// GPT-2's bytes_to_unicode: each byte stands for one printable code point, so any byte string is a string of
// characters a vocabulary can hold.
class ByteLevelAlphabet {
 public:
  static const ByteLevelAlphabet& get();
  // Each byte of `bytes` replaced by its character (UTF-8).
  std::string map(std::string_view bytes) const;
  // The bytes behind `token` when every character of it is in the alphabet; false (out untouched) otherwise.
  bool unmap(std::string_view token, std::string& out) const;

 private:
  ByteLevelAlphabet();
  std::string char_of_byte_[256];
  std::vector<int> byte_of_char_;  // indexed by code point (all below 0x144); -1: not in the alphabet
};

// `text` with each ill-formed UTF-8 sequence replaced by U+FFFD, or nullopt when it has none (no copy of a valid
// corpus): the tokenizers library reads Rust strings, which are valid UTF-8, so a corpus byte that is not
// becomes the replacement character as a lossy decode would.
std::optional<std::string> repair_utf8(std::string_view text);

// The normalizer: none, NFC, Prepend (a non-empty piece gets the string in front: Llama 2's legacy "▁"), Replace
// of a literal string (" " -> "▁"), or a Sequence of those, applied in order.
class Normalizer {
 public:
  static Normalizer from_json(const nlohmann::json* spec, const JsonPlace& at);
  bool identity() const { return ops_.empty(); }
  std::string apply(std::string_view text) const;

  struct Op {
    enum class Kind { nfc, prepend, replace } kind;
    std::string text, with;  // prepend: text; replace: every `text` becomes `with`
  };

 private:
  std::vector<Op> ops_;
};

// The pre-tokenizer: a chain of steps, each splitting every piece the previous step produced.
class PreTokenizer {
 public:
  static PreTokenizer from_json(const nlohmann::json* spec, const JsonPlace& at);
  // Calls `emit` with each non-empty piece of `text` in order (what the model then encodes). `at_start`: the text
  // begins at offset 0 of the input (Metaspace's prepend_scheme "first").
  void run(std::string_view text, bool at_start, const std::function<void(std::string_view)>& emit) const;

  struct Step {
    std::shared_ptr<const icu::RegexPattern> split;  // Split: its pattern (behavior Isolated)
    bool byte_level = false;                         // ByteLevel: map bytes to the alphabet ...
    bool add_prefix_space = true;                    // ... after a space is put before a piece without one
    bool use_regex = true;                           // ... and GPT-2's split
    std::string metaspace;                           // Metaspace: spaces become this character ...
    std::string prepend_scheme;                      // ... which is put before a piece: always | first | never ...
    bool metaspace_split = true;                     // ... and each occurrence begins a new piece
  };

 private:
  std::vector<Step> steps_;
};

}  // namespace fwlab

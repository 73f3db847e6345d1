// tokenizer.json's "added_tokens" (special and not), split out of the text before pre-tokenization as the
// tokenizers library does (tokenizer/added_vocabulary.rs): the leftmost-longest occurrence wins; single_word,
// lstrip and rstrip are honoured; tokens with normalized = false are matched in the raw text, the others in the
// normalized text (their own content normalized too).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/tokenizers/hf_bpe_model.h"
#include "text/tokenizers/hf_json_file.h"
#include "text/tokenizers/hf_pretokenizer.h"

namespace fwlab {

struct AddedToken {
  std::string content;
  std::string pattern;  // what is searched for: the content, normalized when `normalized`
  int32_t id = 0;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

class AddedVocabulary {
 public:
  // Ids as tokenizers assigns them on load: the model's id when the content is in the vocab (or an earlier
  // added token's), else the next id after the model's vocabulary, in file order. A file whose "id" differs
  // gets a warning on stderr, as tokenizers prints one.
  AddedVocabulary(const nlohmann::json* list, const BpeModel& model, const Normalizer& normalizer, const JsonPlace& at);

  // Calls emit(piece, id) for the pieces of `text` in order: id >= 0 for an added token (the piece includes
  // the spaces lstrip / rstrip took), -1 for the non-empty text between them. `normalized`: which tokens are
  // searched for, those matched in normalized text or those matched in raw text.
  void split(std::string_view text, bool normalized, const std::function<void(std::string_view, int32_t)>& emit) const;

  std::optional<int32_t> id_of(const std::string& content) const;
  const AddedToken* token(int32_t id) const;
  int64_t max_id() const;  // -1 when there are none

 private:
  struct Match {
    size_t start, stop;
    const AddedToken* token;
  };
  std::vector<Match> raw_matches(std::string_view text, bool normalized) const;
  bool widen(const AddedToken& t, std::string_view text, size_t& start, size_t& stop) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<std::string, size_t> by_content_;
  std::unordered_map<int32_t, size_t> by_id_;
  // [normalized][first byte of the pattern] -> tokens, longest pattern first (leftmost-longest matching).
  std::array<std::array<std::vector<size_t>, 256>, 2> index_;
  std::array<bool, 2> any_{false, false};
};

}  // namespace fwlab

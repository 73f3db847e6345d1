#include "text/tokenizers/sentencepiece_model.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>

#include "text/tokenizers/sentencepiece_bridge.h"

namespace fwlab {

namespace {

// The bridge's function table, the library opened once per process and never closed.
const FwlabSentencePieceApi& bridge() {
  static std::once_flag once;
  static const FwlabSentencePieceApi* api = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    const char* override_path = std::getenv("FWLAB_SENTENCEPIECE_BRIDGE");
    const std::string path = override_path && *override_path ? override_path : FWLAB_SENTENCEPIECE_BRIDGE;
    // RTLD_LOCAL: nothing else binds to its symbols; RTLD_DEEPBIND: libsentencepiece binds to its own protobuf.
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!handle) {
      failure = fmt::format("cannot open the SentencePiece bridge {}: {}", path, ::dlerror());
      return;
    }
    const auto entry = reinterpret_cast<FwlabSentencePieceApiFn>(::dlsym(handle, FWLAB_SENTENCEPIECE_API_SYMBOL));
    if (!entry)
      failure = fmt::format("{} has no {}", path, FWLAB_SENTENCEPIECE_API_SYMBOL);
    else
      api = entry();
  });
  if (!api) throw std::runtime_error(failure);
  return *api;
}

void take_ids(void* context, const int* ids, size_t n) {
  static_cast<std::vector<int>*>(context)->assign(ids, ids + n);
}
void take_text(void* context, const char* text, size_t n) {
  static_cast<std::vector<char>*>(context)->assign(text, text + n);
}

}  // namespace

SentencePieceModel::SentencePieceModel(const char* path) : api_(&bridge()) {
  char error[1024] = "";
  model_ = api_->load(path, error, sizeof error);
  if (!model_) throw std::runtime_error(error);
}

SentencePieceModel::~SentencePieceModel() { api_->release(model_); }

std::vector<int> SentencePieceModel::encode(const char* text, size_t size) const {
  std::vector<int> ids;
  char error[1024] = "";
  if (api_->encode(model_, text, size, take_ids, &ids, error, sizeof error) != 0) throw std::runtime_error(error);
  return ids;
}

std::vector<char> SentencePieceModel::decode(const std::vector<int>& ids) const {
  std::vector<char> text;
  char error[1024] = "";
  if (api_->decode(model_, ids.data(), ids.size(), take_text, &text, error, sizeof error) != 0)
    throw std::runtime_error(error);
  return text;
}

int SentencePieceModel::piece_size() const { return api_->piece_size(model_); }
int SentencePieceModel::piece_to_id(const char* piece, size_t size) const {
  return api_->piece_to_id(model_, piece, size);
}
bool SentencePieceModel::is_unknown(int id) const { return api_->is_unknown(model_, id) != 0; }
int SentencePieceModel::bos_id() const { return api_->bos_id(model_); }
int SentencePieceModel::eos_id() const { return api_->eos_id(model_); }

}  // namespace fwlab

#include "text/tokenizers/tokenizer_check.h"

#include <fmt/format.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "contract/formats/corpus_files.h"
#include "text/tokenizers/hf_tokenizer.h"
#include "text/tokenizers/joint_vocabulary.h"
#include "text/tokenizers/sentencepiece_model.h"

namespace fwlab {

namespace {

namespace fs = std::filesystem;

// A file as it is now (path, size, modification time): a sweep's jobs share a tokenizer, read once.
std::string file_stamp(const fs::path& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  const auto time = fs::last_write_time(path, ec).time_since_epoch().count();
  return fmt::format("{}|{}|{};", path.string(), size, time);
}

// What `load` threw ("" when it returned), once per key.
std::string load_message(const std::string& key, const std::function<void()>& load) {
  static std::mutex mutex;
  static std::map<std::string, std::string> said;
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = said.find(key); it != said.end()) return it->second;
  std::string message;
  try {
    load();
  } catch (const std::exception& e) {
    message = e.what();
  }
  return said[key] = message;
}

void check_hf_tokenizer(const DataSpec& d, std::vector<SpecError>& out) {
  const auto dir = d.hf_tokenizer_dir();
  std::string key;
  try {
    for (const auto& file : hf_tokenizer_files(dir)) key += file_stamp(file);
  } catch (const DataError&) {
    return;  // no tokenizer file: input_problems reports that
  }
  if (const auto message = load_message(key, [&] { load_hf_tokenizer(dir); }); !message.empty())
    out.emplace_back("data.tokenizer", message);
}

// The user's data.vocab, or the joint vocabulary an earlier job learned (a damaged one would be used as is).
void check_translation_vocabulary(const DataSpec& d, std::vector<SpecError>& out) {
  const auto path = !d.vocab.empty() ? d.vocab_path() : joint_vocabulary_path(d.path, d.src, d.tgt, d.vocab_size);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return;  // a missing data.vocab is input_problems'; a joint one is learned
  const auto message = load_message(file_stamp(path), [&] {
    std::unique_ptr<SentencePieceModel> sp;
    try {
      sp = std::make_unique<SentencePieceModel>(path.c_str());
    } catch (const std::runtime_error& e) {  // SentencePiece's reason does not say which file
      throw DataError(fmt::format("{}: not a SentencePiece model ({})", path, e.what()));
    }
    check_vocabulary_ids(*sp, path);
  });
  if (!message.empty()) out.emplace_back(d.vocab.empty() ? "data.vocab_size" : "data.vocab", message);
}

}  // namespace

std::vector<SpecError> tokenizer_problems(const JobSpec& spec) {
  std::vector<SpecError> out;
  std::error_code ec;
  if (spec.data.hf_tokenizer() && fs::is_directory(spec.data.hf_tokenizer_dir(), ec))
    check_hf_tokenizer(spec.data, out);
  if (spec.kind == "translate") check_translation_vocabulary(spec.data, out);
  return out;
}

}  // namespace fwlab

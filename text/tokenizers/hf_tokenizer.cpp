#include "text/tokenizers/hf_tokenizer.h"

#include <fmt/format.h>

#include "contract/formats/corpus_files.h"
#include "text/tokenizers/hf_tokenizer_json.h"
#include "text/tokenizers/sentencepiece_tokenizer.h"

namespace fwlab {

namespace fs = std::filesystem;

std::vector<fs::path> hf_tokenizer_files(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw DataError(fmt::format("{}: the tokenizer directory does not exist (data.tokenizer = \"hf:{}\")", dir, dir));
  std::vector<fs::path> files;
  for (const char* name : {"tokenizer.json", "tokenizer.model"})
    if (fs::is_regular_file(fs::path(dir) / name, ec)) {
      files.push_back(fs::path(dir) / name);
      break;  // tokenizer.json wins: it is what transformers' fast tokenizer reads
    }
  if (files.empty()) throw DataError(fmt::format("{}: neither tokenizer.json nor tokenizer.model is there", dir));
  if (const auto config = fs::path(dir) / "tokenizer_config.json"; fs::is_regular_file(config, ec))
    files.push_back(config);
  return files;
}

std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& dir) {
  const auto files = hf_tokenizer_files(dir);
  const std::string config = files.size() > 1 ? files[1].string() : "";
  const auto name = "hf:" + dir;
  if (files[0].filename() == "tokenizer.json")
    return std::make_unique<HfJsonTokenizer>(files[0].string(), config, name);
  return std::make_unique<SentencePieceTokenizer>(files[0].string(), config, name);
}

}  // namespace fwlab

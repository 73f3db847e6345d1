#include "text/corpora/corpus.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fwlab {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(fmt::format("{}: cannot open", path));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string strip_brown_tags(const std::string& tagged) {
  std::string out;
  std::istringstream lines(tagged);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream tokens(line);
    std::string token, sentence;
    while (tokens >> token) {
      const auto slash = token.rfind('/');
      if (!sentence.empty()) sentence += ' ';
      sentence += slash == std::string::npos ? token : token.substr(0, slash);
    }
    if (!sentence.empty()) out += sentence + '\n';
  }
  return out;
}

TextSplits load_brown(const std::string& dir) {
  const auto files = brown_files(dir);
  TextSplits s;
  for (size_t i = 0; i < files.size(); ++i) {
    auto text = strip_brown_tags(read_file(files[i]));
    (i % 20 == 18 ? s.valid : i % 20 == 19 ? s.test : s.train) += text;
  }
  return s;
}

TextSplits load_wikitext(const std::string& dir) {
  TextSplits s;
  s.train = read_file((fs::path(dir) / "wiki.train.raw").string());
  s.valid = read_file((fs::path(dir) / "wiki.valid.raw").string());
  s.test = read_file((fs::path(dir) / "wiki.test.raw").string());
  return s;
}

TextSplits load_enwik8(const std::string& path) {
  auto bytes = read_file(path);
  const auto [n_train, n_valid] = enwik8_splits(path, bytes.size());
  TextSplits s;
  s.train = bytes.substr(0, n_train);
  s.valid = bytes.substr(n_train, n_valid);
  s.test = bytes.substr(n_train + n_valid);
  return s;
}

TokenSplits map_token_files(const std::string& dir, int width, int64_t vocab) {
  const fs::path d(dir);
  auto map = [&](const fs::path& path) { return TokenStream::map_file(path.string(), width, vocab); };
  TokenSplits t;
  t.train = map(d / "train.bin");
  t.valid = map(fs::exists(d / "val.bin") || !fs::exists(d / "valid.bin") ? d / "val.bin" : d / "valid.bin");
  t.valid.check_all();
  if (fs::exists(d / "test.bin")) {
    t.test = map(d / "test.bin");
    t.test.check_all();
  }
  return t;
}

}  // namespace fwlab

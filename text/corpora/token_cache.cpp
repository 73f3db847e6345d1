#include "text/corpora/token_cache.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "contract/formats/corpus_files.h"
#include "contract/job/events.h"
#include "contract/job/file_identity.h"

namespace fwlab {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSplits[] = {"train.bin", "valid.bin", "test.bin"};
constexpr const char* kFormat = "fwlab-tokens-1";  // bump when the layout or the split rules change

// Somewhere writable: beside the corpus if we may write there, else the user's cache directory.
fs::path cache_root(const TokenizeRequest& r) {
  const fs::path first = r.corpus_files.front();
  const fs::path beside = first.parent_path() / ".fwlab-tokens";
  std::error_code ec;
  fs::create_directories(beside, ec);
  if (!ec && ::access(beside.c_str(), W_OK) == 0) return beside;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const fs::path user = xdg && *xdg ? fs::path(xdg) : fs::path(home ? home : "/tmp") / ".cache";
  const auto root = user / "fwlab" / "tokens";
  fs::create_directories(root, ec);
  if (ec)
    throw DataError(fmt::format("cannot create a tokenization cache beside {} nor in {}: {}", first.string(),
                                root.string(), ec.message()));
  return root;
}

TokenizedSplits map_splits(const fs::path& dir, int width, int64_t vocab, bool hit) {
  TokenizedSplits out;
  out.train = TokenStream::map_file((dir / kSplits[0]).string(), width, vocab);
  out.valid = TokenStream::map_file((dir / kSplits[1]).string(), width, vocab);
  out.test = TokenStream::map_file((dir / kSplits[2]).string(), width, vocab);
  out.cache_dir = dir.string();
  out.hit = hit;
  return out;
}

void write_ids(const fs::path& path, const std::vector<int32_t>& ids, int width) {
  std::string bytes(ids.size() * static_cast<size_t>(width), '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto v = static_cast<uint32_t>(ids[i]);
    for (int b = 0; b < width; ++b)
      bytes[i * static_cast<size_t>(width) + static_cast<size_t>(b)] = static_cast<char>((v >> (8 * b)) & 0xFF);
  }
  write_file_atomic(path.string(), bytes);
}

}  // namespace

TokenizedSplits cached_tokenization(const TokenizeRequest& r) {
  if (r.corpus_files.empty()) throw DataError("tokenization cache: no corpus files");
  const int width = r.vocab <= 65536 ? 2 : 4;
  const auto key =
      sha256_hex(fmt::format("{}|{}|{}|{}|{}", kFormat, r.source, r.tokenizer, files_identity("corpus", r.corpus_files),
                             files_identity("tokenizer", r.tokenizer_files)))
          .substr(0, 16);
  const auto dir = cache_root(r) / fmt::format("{}-{}-{}", r.source, r.tokenizer, key);
  const auto done = dir / "meta.json";  // written last: its presence means the three files are whole
  if (fs::exists(done)) return map_splits(dir, width, r.vocab, true);

  fs::create_directories(dir);
  const int lock = ::open((dir.string() + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0 || ::flock(lock, LOCK_EX) != 0)
    throw DataError(fmt::format("{}.lock: cannot lock the tokenization cache", dir.string()));
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }
  } unlock{lock};
  if (fs::exists(done)) return map_splits(dir, width, r.vocab, true);  // another job tokenized it while we waited
  const auto splits = r.tokenize();
  nlohmann::json meta = {
      {"format", kFormat}, {"source", r.source}, {"tokenizer", r.tokenizer}, {"bytes_per_token", width}};
  for (size_t i = 0; i < 3; ++i) {
    write_ids(dir / kSplits[i], splits.at(i), width);
    meta["tokens"][kSplits[i]] = splits.at(i).size();
  }
  for (const auto& f : r.corpus_files) meta["corpus_files"].push_back(f.string());
  write_file_atomic(done.string(), meta.dump(2) + "\n");
  return map_splits(dir, width, r.vocab, false);
}

}  // namespace fwlab

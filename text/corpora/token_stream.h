// The tokens of one split, in memory (tokenized text) or memory-mapped from a file of little-endian uint16 /
// uint32 ids (nanoGPT's train.bin layout). A mapped file is read page by page as windows are drawn: a 10 GB
// train.bin costs the pages of the windows in use, not 10 GB (or 20 GB as int32) of RAM.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fwlab {

class TokenStream {
 public:
  TokenStream() = default;
  explicit TokenStream(std::vector<int32_t> ids);
  // Maps `path` (`width` 2 or 4 bytes per id). Ids are checked against `vocab` as they are read (DataError
  // naming the file and byte offset): a mapped file is never scanned whole.
  static TokenStream map_file(const std::string& path, int width, int64_t vocab);

  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Tokens [start, start + len) into `out`.
  void copy(int64_t start, int64_t len, int32_t* out) const;
  std::vector<int32_t> to_vector() const { return slice(0, size_); }
  std::vector<int32_t> slice(int64_t start, int64_t len) const;
  // Checks every id against the vocabulary now (small splits: validation and test).
  void check_all() const;
  const std::string& path() const { return path_; }

 private:
  struct Mapping;
  std::shared_ptr<const Mapping> mapping_;
  std::shared_ptr<const std::vector<int32_t>> owned_;
  int64_t size_ = 0;
  int width_ = 4;
  int64_t vocab_ = 0;
  std::string path_;
};

}  // namespace fwlab

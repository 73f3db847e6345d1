#include "text/corpora/token_stream.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "contract/formats/corpus_files.h"

namespace fwlab {

struct TokenStream::Mapping {
  const uint8_t* bytes = nullptr;
  size_t length = 0;
  ~Mapping() {
    if (bytes && length) ::munmap(const_cast<uint8_t*>(bytes), length);
  }
};

TokenStream::TokenStream(std::vector<int32_t> ids)
    : owned_(std::make_shared<const std::vector<int32_t>>(std::move(ids))),
      size_(static_cast<int64_t>(owned_->size())) {}

TokenStream TokenStream::map_file(const std::string& path, int width, int64_t vocab) {
  if (width != 2 && width != 4)
    throw DataError(fmt::format("{}: token width {} is not 2 (uint16) or 4 (uint32) bytes", path, width));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw DataError(fmt::format("{}: not a regular file", path));
  }
  const auto length = static_cast<size_t>(st.st_size);
  if (length % static_cast<size_t>(width)) {
    ::close(fd);
    throw DataError(fmt::format("{}: {} bytes is not a whole number of uint{} tokens", path, length, width * 8));
  }
  auto m = std::make_shared<Mapping>();
  if (length > 0) {
    void* p = ::mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw DataError(fmt::format("{}: cannot map: {}", path, std::strerror(errno)));
    }
    ::madvise(p, length, MADV_RANDOM);  // windows are drawn at random starts: no read-ahead of whole regions
    m->bytes = static_cast<const uint8_t*>(p);
    m->length = length;
  }
  ::close(fd);  // the mapping keeps the file
  TokenStream s;
  s.mapping_ = std::move(m);
  s.size_ = static_cast<int64_t>(length / static_cast<size_t>(width));
  s.width_ = width;
  s.vocab_ = vocab;
  s.path_ = path;
  return s;
}

void TokenStream::copy(int64_t start, int64_t len, int32_t* out) const {
  if (start < 0 || len < 0 || start + len > size_)
    throw DataError(fmt::format("{}: tokens [{}, {}) lie outside the {} of the split", path_.empty() ? "tokens" : path_,
                                start, start + len, size_));
  if (owned_) {
    std::memcpy(out, owned_->data() + start, static_cast<size_t>(len) * sizeof(int32_t));
    return;
  }
  const uint8_t* p = mapping_->bytes + static_cast<size_t>(start) * static_cast<size_t>(width_);
  for (int64_t i = 0; i < len; ++i) {
    uint32_t id;
    if (width_ == 2) {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);  // little-endian files on little-endian hosts (x86, ARM)
      id = v;
    } else {
      std::memcpy(&id, p + 4 * i, 4);
    }
    if (static_cast<int64_t>(id) >= vocab_)
      throw DataError(fmt::format("{}: token {} at byte offset {} is outside the vocabulary of {}", path_, id,
                                  (start + i) * width_, vocab_));
    out[i] = static_cast<int32_t>(id);
  }
}

std::vector<int32_t> TokenStream::slice(int64_t start, int64_t len) const {
  std::vector<int32_t> out(static_cast<size_t>(len));
  copy(start, len, out.data());
  return out;
}

void TokenStream::check_all() const {
  constexpr int64_t kChunk = 1 << 20;
  std::vector<int32_t> buf;
  for (int64_t at = 0; at < size_; at += kChunk) {
    const int64_t n = std::min(kChunk, size_ - at);
    buf.resize(static_cast<size_t>(n));
    copy(at, n, buf.data());
  }
}

}  // namespace fwlab

// The next chunk's memory, brought into the caches a few lines at a time between this chunk's products. A chunked
// CPU kernel reads and writes each chunk's rows of several large buffers once; a small BLAS product that meets a
// cold operand waits for it line by line, and one burst of prefetches for a whole chunk (~50 KB) stalls on the
// core's dozen or so outstanding misses instead. Spread over a chunk's products, the fetches overlap the arithmetic
// (kernels/delta/chunk_cpu.cpp's backward measured: the burst took ~8,000 cycles a chunk of its ~40,000).
#pragma once

#include <array>
#include <cstdint>

#include "kernels/common/vector_clones.h"

namespace fwlab::kernels {

class Lookahead {
 public:
  // [p, p + count) of T, to be read; at most 8 ranges (more are not fetched).
  template <typename T>
  void add(const T* p, int64_t count) {
    if (count > 0 && used_ < ranges_.size())
      ranges_[used_++] = {reinterpret_cast<const char*>(p), count * static_cast<int64_t>(sizeof(T))};
  }

  // The next `lines` cache lines of what was added.
  FWLAB_HOT void fetch(int64_t lines) {
    for (; lines > 0 && next_ < used_; --lines) {
      __builtin_prefetch(ranges_[next_].p + offset_, 0, 3);
      if ((offset_ += 64) >= ranges_[next_].bytes) ++next_, offset_ = 0;
    }
  }

  FWLAB_HOT void fetch_rest() { fetch(INT64_MAX); }

  void clear() { used_ = next_ = 0, offset_ = 0; }

 private:
  struct Range {
    const char* p;
    int64_t bytes;
  };
  std::array<Range, 8> ranges_{};
  size_t used_ = 0, next_ = 0;
  int64_t offset_ = 0;
};

}  // namespace fwlab::kernels

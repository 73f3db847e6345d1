// How many heads one task of the CPU kernels' parallel loops (at::parallel_for over B·H) takes: all of them, on the
// calling thread, where a head's work is too small to pay for an OpenMP fork and join. A decode step's single token
// (D = 64, M = 32: ~2k multiply-adds a head) is such work; waking the second thread for it cost more than it did.
#pragma once

#include <algorithm>
#include <cstdint>

namespace fwlab::kernels {

// work_per_head: multiply-adds (or a count proportional to them) one head's share of the loop does.
inline int64_t head_grain(int64_t heads, int64_t work_per_head) {
  constexpr int64_t kTaskWork = int64_t{1} << 16;  // ~10-20 us of arithmetic: a few times a fork and join
  return std::clamp<int64_t>(kTaskWork / std::max<int64_t>(work_per_head, 1), 1, std::max<int64_t>(heads, 1));
}

}  // namespace fwlab::kernels

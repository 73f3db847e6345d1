// Heads handed to the threads one at a time from a shared counter, for CPU kernels whose heads each take long
// (a chunked recurrence over a whole sequence). at::parallel_for gives each thread a fixed share up front, so the
// faster thread waited for the slower one at the join; this VM's two cores run at different speeds from one minute
// to the next: perf found the chunked delta kernel 6.5 % of its time in that wait (16 heads on 2 threads), 4.2 %
// with the queue.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace fwlab::kernels {

// run(n) for n in [0, heads), each once, on the ATen thread pool.
template <typename Run>
void for_each_head_queued(int64_t heads, const Run& run) {
  std::atomic<int64_t> next{0};
  const int64_t workers = std::min<int64_t>(heads, at::get_num_threads());
  at::parallel_for(0, workers, 1, [&](int64_t, int64_t) {
    for (int64_t n = next.fetch_add(1); n < heads; n = next.fetch_add(1)) run(n);
  });
}

}  // namespace fwlab::kernels

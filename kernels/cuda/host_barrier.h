// A barrier for the std::threads that emulate a GPU block on the host (kernels/decay/cuda/chunks_host.h) or one of
// its warps (kernels/cuda/warp_mma_host.h). Tests only.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

namespace fwlab::cuda {

// A reusable barrier of n threads (generation-counted, so that a fast thread cannot pass the next one early). The
// emulated blocks have far more threads than the machine has cores and meet thousands of times: a waiter yields
// twice (the last ones often arrive meanwhile), then sleeps on the generation (a futex). Measured on the tensor-core
// host tests, two cores, alone and beside one busy process (as under ctest -j2): this 19 s and 47 s; never yielding
// 20 and 46; yielding 8 times before sleeping 19 and 53, 32 times 19 and 109; yielding only, never sleeping, 97 s
// beside the busy process. The counters' acquire-release order makes every write before the barrier visible after it
// (and to TSan).
class HostBarrier {
 public:
  explicit HostBarrier(int n) : n_(n) {}
  void wait() {
    const int64_t generation = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      arrived_.store(0, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_acq_rel);
      generation_.notify_all();
      return;
    }
    for (int spin = 0; spin < kYields; ++spin) {
      if (generation_.load(std::memory_order_acquire) != generation) return;
      std::this_thread::yield();
    }
    while (generation_.load(std::memory_order_acquire) == generation) generation_.wait(generation);
  }
  static void wait_on(void* barrier) { static_cast<HostBarrier*>(barrier)->wait(); }

 private:
  static constexpr int kYields = 2;
  const int n_;
  std::atomic<int> arrived_{0};
  std::atomic<int64_t> generation_{0};
};

}  // namespace fwlab::cuda

// A barrier for the std::threads that emulate a GPU block on the host (kernels/decay/cuda/chunks_host.h) or one of
// its warps (kernels/cuda/warp_mma_host.h). Tests only.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

namespace fwlab::cuda {

// A reusable barrier of n threads (generation-counted, so that a fast thread cannot pass the next one early). The
// waiters yield rather than sleep: the emulated blocks have far more threads than the machine has cores and meet
// thousands of times, and waking 32 or 256 sleepers through one condition variable cost more than the arithmetic.
// The counter's acquire-release order makes every write before the barrier visible after it (and to TSan).
class HostBarrier {
 public:
  explicit HostBarrier(int n) : n_(n) {}
  void wait() {
    const int64_t generation = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      arrived_.store(0, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_acq_rel);
    } else {
      while (generation_.load(std::memory_order_acquire) == generation) std::this_thread::yield();
    }
  }
  static void wait_on(void* barrier) { static_cast<HostBarrier*>(barrier)->wait(); }

 private:
  const int n_;
  std::atomic<int> arrived_{0};
  std::atomic<int64_t> generation_{0};
};

}  // namespace fwlab::cuda

// The chunked decay kernel's block programs (kernels/decay/cuda/chunks.h) run on the host: block after block, each by
// `threads` std::threads that share the block's scratch and meet at its barriers as a GPU block's threads do, so that
// the tests check the arithmetic and that every read of shared scratch is separated from its writes by a barrier (a
// missing one shows as wrong results with several threads). Tests only: slow.
#pragma once

#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "kernels/cuda/host_barrier.h"
#include "kernels/cuda/warp_mma_host.h"
#include "kernels/decay/cuda/chunks.h"

namespace fwlab::cuda {

// A block's scratch as the GPU's shared memory starts: not zeros, and not what the previous block left either.
// Every byte 0xFF reads as NaN in fp64, fp32, bf16 and fp16, so a read of an element this block never wrote
// poisons the result instead of passing as a 0 or as a stale value. poison() before every block.
template <typename Acc>
struct GarbageScratch {
  std::vector<Acc> values;
  explicit GarbageScratch(int64_t bytes) : values(size_t(bytes) / sizeof(Acc) + 1) {}
  void* poison() {
    std::memset(values.data(), 0xff, values.size() * sizeof(Acc));
    return values.data();
  }
};

// Runs one block program on `threads` threads (the calling one included); its whole warps can use the tensor-core
// programs' products (kernels/cuda/warp_mma_host.h).
inline void run_block(int threads, const std::function<void(const BlockCtx&)>& program) {
  if (threads <= 1) return program(BlockCtx{});
  HostBarrier barrier(threads);
  HostWarps warps(threads);
  auto ctx = [&](int t) { return BlockCtx{t, threads, &HostBarrier::wait_on, &barrier, &HostWarps::mma, &warps}; };
  std::vector<std::thread> others;
  for (int t = 1; t < threads; ++t) others.emplace_back([&, t] { program(ctx(t)); });
  program(ctx(0));
  for (auto& t : others) t.join();
}

// The scans block by block as the GPU launches them: kScanRows state rows of one head each (D a multiple of 16).
template <typename In, typename Acc>
void run_states_on_host(const ChunkProblem<In, Acc>& p, bool reverse, Acc* out, int threads) {
  GarbageScratch<Acc> scratch(ScanScratch<In, Acc>::bytes(kScanRows, p.M));
  for (int64_t h = 0; h < p.heads; ++h)
    for (int64_t row0 = 0; row0 < p.D; row0 += kScanRows) {
      const auto s = ScanScratch<In, Acc>::carve(scratch.poison(), kScanRows, p.M);
      run_block(threads, [&](const BlockCtx& ctx) {
        if (reverse)
          scan_states<true>(ctx, p, h, row0, kScanRows, out, s);
        else
          scan_states<false>(ctx, p, h, row0, kScanRows, out, s);
      });
    }
}

// y [heads, steps, D] without the diagonal pair (kernels/decay/cuda/chunks.h); states [heads, chunks + 1, D, M] (the
// last: the final state).
template <typename In, typename Acc>
void run_forward_on_host(const ChunkProblem<In, Acc>& p, Acc* y, Acc* states, int threads) {
  run_states_on_host(p, false, states, threads);
  GarbageScratch<Acc> scratch(Scratch<In, Acc>::bytes(p.D, p.M));
  for (int64_t h = 0; h < p.heads; ++h)
    for (int64_t n = 0; n < p.chunks(); ++n) {
      const auto s = Scratch<In, Acc>::carve(scratch.poison(), p.D, p.M);
      run_block(threads, [&](const BlockCtx& ctx) { chunk_outputs(ctx, p, h, n, states, y, s); });
    }
}

// dq, dk [heads, steps, M], dv [heads, steps, D] (Acc); states and dstates [heads, chunks + 1, D, M] as scratch
// (dstates[.., 0] is the gradient of state0).
template <typename In, typename Acc>
void run_backward_on_host(const ChunkProblem<In, Acc>& p, Acc* states, Acc* dstates, Acc* dq, Acc* dk, Acc* dv,
                          int threads) {
  run_states_on_host(p, false, states, threads);
  run_states_on_host(p, true, dstates, threads);
  GarbageScratch<Acc> scratch(Scratch<In, Acc>::bytes(p.D, p.M));
  for (int64_t h = 0; h < p.heads; ++h)
    for (int64_t n = 0; n < p.chunks(); ++n) {
      const auto s = Scratch<In, Acc>::carve(scratch.poison(), p.D, p.M);
      run_block(threads, [&](const BlockCtx& ctx) { chunk_gradients(ctx, p, h, n, states, dstates, dq, dk, dv, s); });
    }
}

}  // namespace fwlab::cuda

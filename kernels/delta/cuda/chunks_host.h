// The delta family's chunked block programs (kernels/delta/cuda/chunks.h) run on the host as the GPU launches them:
// block after block, each by `threads` std::threads meeting at its barriers, the block's scratch poisoned first
// (kernels/decay/cuda/chunks_host.h says why), so that a missing barrier or a read of unwritten scratch shows as a
// wrong result in the tests. Tests only: slow.
#pragma once

#include <algorithm>

#include "kernels/decay/cuda/chunks_host.h"  // run_block, GarbageScratch
#include "kernels/delta/cuda/chunks.h"

namespace fwlab::cuda::delta {

template <typename In, typename Acc>
void prepare_on_host(const Problem<In, Acc>& p, int threads) {
  GarbageScratch<Acc> scratch(kChunk * kChunk * int64_t(sizeof(Acc)));
  for (int64_t h = 0; h < p.heads; ++h)
    for (int64_t n = 0; n < p.chunks(); ++n) {
      auto* A = static_cast<Acc*>(scratch.poison());
      run_block(threads, [&](const BlockCtx& ctx) { prepare_chunk(ctx, p, h, n, A); });
    }
}

// Both scans block by block: kScanRows state rows of one head each (the last block of a head may have fewer).
template <typename In, typename Acc>
void scan_on_host(const Problem<In, Acc>& p, bool reverse, Acc* out, int threads) {
  GarbageScratch<Acc> scratch(scan_scratch_bytes<Acc>(p.M));
  for (int64_t h = 0; h < p.heads; ++h)
    for (int64_t row0 = 0; row0 < p.D; row0 += kScanRows) {
      auto* S = static_cast<Acc*>(scratch.poison());
      const int64_t rows = std::min<int64_t>(kScanRows, p.D - row0);
      run_block(threads, [&](const BlockCtx& ctx) {
        if (reverse)
          scan_reverse(ctx, p, h, row0, rows, out, S);
        else
          scan_forward(ctx, p, h, row0, rows, out, S);
      });
    }
}

// y [heads, steps, D]; states [heads, chunks + 1, D, M] (the last: the final state). Writes g, W, U, u.
template <typename In, typename Acc>
void forward_on_host(const Problem<In, Acc>& p, Acc* y, Acc* states, int threads) {
  prepare_on_host(p, threads);
  scan_on_host(p, false, states, threads);
  GarbageScratch<Acc> scratch(kChunk * kChunk * int64_t(sizeof(Acc)));
  for (int64_t h = 0; h < p.heads; ++h)
    for (int64_t n = 0; n < p.chunks(); ++n) {
      auto* P = static_cast<Acc*>(scratch.poison());
      run_block(threads, [&](const BlockCtx& ctx) { chunk_outputs(ctx, p, h, n, states, y, P); });
    }
}

// Every gradient (kernels/delta/cuda/chunk_gradients.h); states and dstates [heads, chunks + 1, D, M] as scratch
// (dstates[.., 0]: the gradient of state0).
template <typename In, typename Acc>
void backward_on_host(const Problem<In, Acc>& p, Acc* states, Acc* dstates, const Gradients<Acc>& out, int threads) {
  prepare_on_host(p, threads);
  scan_on_host(p, false, states, threads);
  GarbageScratch<Acc> pairs(kChunk * kChunk * int64_t(sizeof(Acc)));
  for (int64_t h = 0; h < p.heads; ++h)
    for (int64_t n = 0; n < p.chunks(); ++n) {
      auto* P = static_cast<Acc*>(pairs.poison());
      run_block(threads, [&](const BlockCtx& ctx) { chunk_du_pairs(ctx, p, h, n, P); });
    }
  scan_on_host(p, true, dstates, threads);
  GarbageScratch<Acc> scratch(GradScratch<Acc>::bytes(p.D, p.M));
  for (int64_t h = 0; h < p.heads; ++h)
    for (int64_t n = 0; n < p.chunks(); ++n) {
      const auto s = GradScratch<Acc>::carve(scratch.poison(), p.D, p.M);
      run_block(threads, [&](const BlockCtx& ctx) { chunk_gradients(ctx, p, h, n, states, dstates, out, s); });
    }
}

}  // namespace fwlab::cuda::delta

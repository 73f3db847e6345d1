// The delta family's chunked block programs (kernels/delta/cuda/chunks.h) run on the host as the GPU launches them:
// block after block, each by `threads` std::threads meeting at its barriers, the block's scratch poisoned first
// (kernels/decay/cuda/chunks_host.h says why), so that a missing barrier or a read of unwritten scratch shows as a
// wrong result in the tests. Tests only: slow.
#pragma once

#include <algorithm>
#include <stdexcept>

#include "kernels/decay/cuda/chunks_host.h"  // run_block, GarbageScratch
#include "kernels/delta/cuda/chunk_gradients_mma.h"
#include "kernels/delta/cuda/chunks_mma.h"
#include "kernels/delta/cuda/chunks.h"

namespace fwlab::cuda::delta {

// tensor_cores: the programs of kernels/delta/cuda/chunks_mma.h and chunk_gradients_mma.h (blocks of whole warps).
inline void check_warps(bool tensor_cores, int threads) {
  if (tensor_cores && (threads < kWarp || threads % kWarp != 0))
    throw std::invalid_argument("delta chunks on the host: the tensor-core programs need whole warps of 32 threads");
}

// P's scratch: Acc [kChunk, kChunk] for the plain programs, In in PairsMma's layout for the tensor-core ones.
template <typename In, typename Acc>
int64_t pairs_bytes() {
  return std::max<int64_t>(kChunk * kChunk * int64_t(sizeof(Acc)), PairsMma<In>::bytes());
}

template <typename In, typename Acc>
void prepare_on_host(const Problem<In, Acc>& p, int threads, bool tensor_cores) {
  GarbageScratch<Acc> scratch(kChunk * kChunk * int64_t(sizeof(Acc)));
  for (int64_t h = 0; h < p.heads; ++h)
    for (int64_t n = 0; n < p.chunks(); ++n) {
      auto* A = static_cast<Acc*>(scratch.poison());
      run_block(threads, [&](const BlockCtx& ctx) {
        if (tensor_cores)
          prepare_chunk_mma(ctx, p, h, n, A);
        else
          prepare_chunk(ctx, p, h, n, A);
      });
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
void forward_on_host(const Problem<In, Acc>& p, Acc* y, Acc* states, int threads, bool tensor_cores = false) {
  check_warps(tensor_cores, threads);
  prepare_on_host(p, threads, tensor_cores);
  scan_on_host(p, false, states, threads);
  GarbageScratch<Acc> scratch(pairs_bytes<In, Acc>());
  for (int64_t h = 0; h < p.heads; ++h)
    for (int64_t n = 0; n < p.chunks(); ++n) {
      void* P = scratch.poison();
      run_block(threads, [&](const BlockCtx& ctx) {
        if (tensor_cores)
          chunk_outputs_mma(ctx, p, h, n, states, y, static_cast<In*>(P));
        else
          chunk_outputs(ctx, p, h, n, states, y, static_cast<Acc*>(P));
      });
    }
}

// Every gradient (kernels/delta/cuda/chunk_gradients.h); states and dstates [heads, chunks + 1, D, M] as scratch
// (dstates[.., 0]: the gradient of state0).
template <typename In, typename Acc>
void backward_on_host(const Problem<In, Acc>& p, Acc* states, Acc* dstates, const Gradients<Acc>& out, int threads,
                      bool tensor_cores = false) {
  check_warps(tensor_cores, threads);
  prepare_on_host(p, threads, tensor_cores);
  scan_on_host(p, false, states, threads);
  GarbageScratch<Acc> pairs(pairs_bytes<In, Acc>());
  for (int64_t h = 0; h < p.heads; ++h)
    for (int64_t n = 0; n < p.chunks(); ++n) {
      void* P = pairs.poison();
      run_block(threads, [&](const BlockCtx& ctx) {
        if (tensor_cores)
          chunk_du_pairs_mma(ctx, p, h, n, static_cast<In*>(P));
        else
          chunk_du_pairs(ctx, p, h, n, static_cast<Acc*>(P));
      });
    }
  scan_on_host(p, true, dstates, threads);
  GarbageScratch<Acc> scratch(GradScratch<Acc>::bytes(p.D, p.M));  // GradScratchMma's is smaller
  for (int64_t h = 0; h < p.heads; ++h)
    for (int64_t n = 0; n < p.chunks(); ++n) {
      void* base = scratch.poison();
      run_block(threads, [&](const BlockCtx& ctx) {
        if (tensor_cores)
          chunk_gradients_mma(ctx, p, h, n, states, dstates, out, GradScratchMma<Acc>::carve(base, p.D, p.M));
        else
          chunk_gradients(ctx, p, h, n, states, dstates, out, GradScratch<Acc>::carve(base, p.D, p.M));
      });
    }
}

}  // namespace fwlab::cuda::delta

// The segment checkpoints of the fused CPU kernels whose state cannot be reverted without dividing by a gate (the
// decay family, the gated delta rule; a gate near 0 would make that unstable): the forward keeps the state before
// every kSegment-th step, the backward walks the segments last to first, recomputes each segment's states forward
// from its checkpoint into a buffer of kSegment + 1 states, then walks that segment backwards. Memory per head:
// T / kSegment checkpoints plus the buffer, instead of T states.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace fwlab::kernels {

// Steps between saved states. The buffer holds kSegment + 1 states of D x M (68 KiB at D = M = 32, float32).
// Measured on the decay kernel (B4 H4 T1024 D = M = 32, 2 threads, fwd+bwd): 8: 14.3 ms, 16: 13.2 ms, 32: 20.7 ms,
// 64: 17.8 ms; beyond 16 the buffer falls out of the faster caches.
constexpr int64_t kSegment = 16;

// Checkpoints a sequence of `steps` steps needs (one where there is none: the tensor is never empty).
inline int64_t segment_count(int64_t steps) { return steps > 0 ? (steps + kSegment - 1) / kSegment : 1; }

// Forward, before step t: keeps S (DM values) if t starts a segment (none kept without a buffer: a forward no
// backward follows).
template <typename T>
inline void keep_checkpoint(int64_t t, const T* S, int64_t DM, T* checkpoints) {
  if (checkpoints && t % kSegment == 0) std::copy(S, S + DM, checkpoints + (t / kSegment) * DM);
}

// Backward over `steps` steps. advance(t, S_prev, S_t) writes step t's state from the one before it;
// back(t, S_prev, S_t) is step t's backward. `states` is the caller's buffer (resized here).
template <typename T, typename Advance, typename Back>
inline void backward_by_segments(int64_t steps, int64_t DM, const T* checkpoints, std::vector<T>& states,
                                 Advance&& advance, Back&& back) {
  states.resize(static_cast<size_t>((kSegment + 1) * DM));
  for (int64_t seg = segment_count(steps) - 1; seg >= 0; --seg) {
    const int64_t start = seg * kSegment, end = std::min(start + kSegment, steps);
    std::copy(checkpoints + seg * DM, checkpoints + (seg + 1) * DM, states.begin());  // states[n]: S_{start + n - 1}
    for (int64_t t = start; t < end; ++t) {
      T* next = states.data() + (t - start + 1) * DM;
      advance(t, static_cast<const T*>(next - DM), next);
    }
    for (int64_t t = end - 1; t >= start; --t) {
      const T* S_t = states.data() + (t - start + 1) * DM;
      back(t, S_t - DM, S_t);
    }
  }
}

}  // namespace fwlab::kernels

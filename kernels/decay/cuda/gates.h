// The chunked decay kernel's gate work, in its own launches (kernels/decay/cuda/gates.cu) and in the accumulation
// type: fp32 for fp32, bf16 and fp16 inputs, fp64 only for fp64 inputs, and nothing walks the whole sequence.
//   sums:      A_t = sum_{r <= t in t's chunk} max(log a_r, floor), what the chunk programs read (chunks.h);
//   gradients: dlog a_r = sum_{t >= r} g_t with g_t = y_off_t * dy_t - v_t * dv_off_t, plus the final state's term
//              (kernels/decay/chunk_cuda.cpp says why), and the same for b with q * dq_off - k * dk_off.
// A gradient's running sum is the sum inside its chunk plus the totals of the chunks after it (three passes: the
// totals, their reverse sums over the chunks, then the sums inside each chunk), so one thread walks 64 steps or the
// chunks, never the sequence. Every sum is compensated (Neumaier's form of Kahan summation): fp32 then rounds about
// once per value, not once per term, as the fp64 sums these replace did; a gate's gradient at T = 8192 sums 8192
// terms (tests/test_decay_gates.cpp measures the difference).
// A GPU thread's work is one column of one (head, chunk), or of one head. No shared memory and no barrier, so the host
// runs the same functions in loops (the CPU runners of kernels/decay/chunk_cuda.cpp do). Plain C++ on the host.
#pragma once

#include <cstdint>

#include "kernels/decay/cuda/chunks.h"  // FWLAB_HD, kChunk, convert

namespace fwlab::cuda {

// A running sum that keeps what each addition rounds away (Neumaier, 1974) in `lost`, to add back at the end. Free
// functions over (sum, lost) rather than a struct, so that the host's loops over many columns keep them in arrays and
// vectorise (the branches are selects). Once the sum is inf (or NaN) nothing is lost any more: inf - inf would make
// `lost`, and so the result, NaN where a plain sum gives inf.
template <typename Acc>
FWLAB_HD inline void compensated_add(Acc& sum, Acc& lost, Acc x) {
  const bool sum_bigger = (sum < 0 ? -sum : sum) >= (x < 0 ? -x : x);
  const Acc t = sum + x, big = sum_bigger ? sum : x, small = sum_bigger ? x : sum;
  lost += t - t == Acc(0) ? (big - t) + small : Acc(0);
  sum = t;
}

// The fields of both programs without their element types, so that the libtorch binding fills them once for either
// runner (the CUDA API of chunks_api.h takes them with a ChunkDtype; the host wraps them in the typed programs).
// Sums: log_gate [heads, T, width] in Acc (steps past T and columns past `width` read 0, the padding's log-gate),
// floored and summed from each chunk's start into out [heads, chunks * kChunk, out_width] (Acc).
struct GateSumArgs {
  const void* log_gate = nullptr;
  void* out = nullptr;
  int64_t heads = 0, T = 0, width = 0, chunks = 0, out_width = 0;
  double floor = 0;
};

// Gradients from the kernel's sums without the diagonal pair: g_t = x1_t * y1_t - x2_t * y2_t per column
// (out_width = the gate's columns), or summed over the columns for a gate the columns share (out_width = 1).
// x1, x2 [heads, steps, width] in the input type, y1, y2 the same in Acc; steps past T are the padding and count
// nothing. final_term [heads, out_width] (Acc, or null): the final state's own term, at the last step. totals:
// scratch [heads, steps / kChunk, out_width]; out [heads, T, out_width] (Acc).
struct GateGradientArgs {
  const void *x1 = nullptr, *x2 = nullptr, *y1 = nullptr, *y2 = nullptr, *final_term = nullptr;
  void *totals = nullptr, *out = nullptr;
  int64_t heads = 0, T = 0, steps = 0, width = 0, out_width = 0;
};

// Both programs work on a block of columns [c0, c0 + count) of one (head, chunk) or one head, with `count` values of
// scratch in `sum` and `lost` (compensated_add): a GPU thread takes one column (count 1, the column fastest across
// threads, so that a warp's loads and stores are consecutive), the host all of a chunk's columns (the columns
// innermost, so that its loops vectorise). Each column's arithmetic is the same either way.
template <typename Acc>
struct GateSums {
  GateSumArgs a;

  FWLAB_HD int64_t items() const { return a.heads * a.chunks * a.out_width; }  // one (head, chunk, column) each
  FWLAB_HD void run(int64_t item) const {
    Acc sum, lost;
    columns(item / a.out_width / a.chunks, item / a.out_width % a.chunks, item % a.out_width, 1, &sum, &lost);
  }
  FWLAB_HD void columns(int64_t h, int64_t n, int64_t c0, int64_t count, Acc* sum, Acc* lost) const {
    const Acc* log_gate = static_cast<const Acc*>(a.log_gate);
    const Acc floor = Acc(a.floor);
    const int64_t inside = c0 >= a.width ? 0 : (c0 + count <= a.width ? count : a.width - c0);  // columns < width
    for (int64_t c = 0; c < count; ++c) sum[c] = lost[c] = 0;
    for (int64_t t = n * kChunk; t < (n + 1) * kChunk; ++t) {
      Acc* out = static_cast<Acc*>(a.out) + (h * a.chunks * kChunk + t) * a.out_width + c0;
      const Acc* x = log_gate + (h * a.T + t) * a.width + c0;
      if (t < a.T)
        for (int64_t c = 0; c < inside; ++c)
          compensated_add(sum[c], lost[c], x[c] < floor ? floor : x[c]);  // -inf (a gate of 0): the floor
      for (int64_t c = 0; c < count; ++c) out[c] = sum[c] + lost[c];
    }
  }
};

template <typename In, typename Acc>
struct GateGradients {
  GateGradientArgs a;

  FWLAB_HD int64_t chunks() const { return a.steps / kChunk; }
  FWLAB_HD int64_t chunk_items() const { return a.heads * chunks() * a.out_width; }  // passes 1 and 3
  FWLAB_HD int64_t column_items() const { return a.heads * a.out_width; }            // pass 2
  FWLAB_HD Acc* totals(int64_t h, int64_t n) const {
    return static_cast<Acc*>(a.totals) + (h * chunks() + n) * a.out_width;
  }

  // Step t's rows of the four inputs; g at a column, and g of a step for out_width 1 (summed over the columns).
  struct Row {
    const In *x1, *x2;
    const Acc *y1, *y2;
    FWLAB_HD Acc at(int64_t c) const { return convert<Acc>(x1[c]) * y1[c] - convert<Acc>(x2[c]) * y2[c]; }
  };
  FWLAB_HD Row row(int64_t h, int64_t t) const {
    const int64_t at = (h * a.steps + t) * a.width;
    return {static_cast<const In*>(a.x1) + at, static_cast<const In*>(a.x2) + at, static_cast<const Acc*>(a.y1) + at,
            static_cast<const Acc*>(a.y2) + at};
  }
  FWLAB_HD Acc shared(const Row& r) const {
    Acc g = 0;
    for (int64_t c = 0; c < a.width; ++c) g += r.at(c);
    return g;
  }
  // Adds step t's g to the sums of columns [c0, c0 + count) (one sum for out_width 1).
  FWLAB_HD void add_step(int64_t h, int64_t t, int64_t c0, int64_t count, Acc* sum, Acc* lost) const {
    const Row r = row(h, t);
    if (a.out_width == 1) return compensated_add(sum[0], lost[0], shared(r));
    for (int64_t c = 0; c < count; ++c) compensated_add(sum[c], lost[c], r.at(c0 + c));
  }
  // Pass 1: chunk n's totals.
  FWLAB_HD void chunk_totals(int64_t h, int64_t n, int64_t c0, int64_t count, Acc* sum, Acc* lost) const {
    for (int64_t c = 0; c < count; ++c) sum[c] = lost[c] = 0;
    for (int64_t t = n * kChunk; t < (n + 1) * kChunk && t < a.T; ++t) add_step(h, t, c0, count, sum, lost);
    for (int64_t c = 0; c < count; ++c) totals(h, n)[c0 + c] = sum[c] + lost[c];
  }
  // Pass 2: each chunk's total becomes the sum over the chunks after it, plus the final term.
  FWLAB_HD void later_chunks(int64_t h, int64_t c0, int64_t count, Acc* sum, Acc* lost) const {
    const Acc* final_term = static_cast<const Acc*>(a.final_term);
    for (int64_t c = 0; c < count; ++c) sum[c] = final_term ? final_term[h * a.out_width + c0 + c] : Acc(0);
    for (int64_t c = 0; c < count; ++c) lost[c] = 0;
    for (int64_t n = chunks() - 1; n >= 0; --n)
      for (int64_t c = 0; c < count; ++c) {
        const Acc own = totals(h, n)[c0 + c];
        totals(h, n)[c0 + c] = sum[c] + lost[c];
        compensated_add(sum[c], lost[c], own);
      }
  }
  // Pass 3: the running sums inside chunk n, from its end, on top of the later chunks'.
  FWLAB_HD void step_sums(int64_t h, int64_t n, int64_t c0, int64_t count, Acc* sum, Acc* lost) const {
    for (int64_t c = 0; c < count; ++c) sum[c] = totals(h, n)[c0 + c], lost[c] = 0;
    for (int64_t t = (n + 1) * kChunk - 1; t >= n * kChunk; --t) {
      if (t >= a.T) continue;
      add_step(h, t, c0, count, sum, lost);
      Acc* out = static_cast<Acc*>(a.out) + (h * a.T + t) * a.out_width + c0;
      for (int64_t c = 0; c < count; ++c) out[c] = sum[c] + lost[c];
    }
  }
};

}  // namespace fwlab::cuda

// The chunked decay kernel's diagonal pair (s = t, on which no gate acts: kernels/decay/cuda/chunks.h leaves it out of
// its sums), added where the results leave the kernel's padded layout:
//   forward   y_t = y_off_t + (q_t . k_t) v_t
//   backward  dq_t = dq_off_t + (dy_t . v_t) k_t,  dk_t = dk_off_t + (dy_t . v_t) q_t,  dv_t = dv_off_t + (q_t . k_t)
//   dy_t
// in the accumulation type, written in the input type straight into [heads, T, width]. One pass over the rows, in place
// of libtorch's casts, products, sums and un-padding copies (and their fp32 copies of q, k and v). One item is one
// step's row; no shared memory, so the host runs the same functions in loops (kernels/decay/chunk_cuda.cpp).
#pragma once

#include <cstdint>

#include "kernels/decay/cuda/chunks.h"  // FWLAB_HD, convert

namespace fwlab::cuda {

// q, k [heads, steps, Mp], v, dy [heads, steps, Dp] in the input type and y_off, dq_off, dk_off, dv_off the same in
// the accumulation type (the kernel's padded layout, steps a multiple of kChunk); y, dv [heads, T, D] and dq, dk
// [heads, T, M] in the input type, or with wide_outputs in the accumulation type (for a caller whose k or v has
// another dtype than q: each is then rounded once, to its own). The forward reads q, k, v, y_off and writes y; the
// backward the rest.
struct DiagonalArgs {
  const void *q = nullptr, *k = nullptr, *v = nullptr, *dy = nullptr;
  const void *y_off = nullptr, *dq_off = nullptr, *dk_off = nullptr, *dv_off = nullptr;
  void *y = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr;
  int64_t heads = 0, T = 0, steps = 0, D = 0, M = 0, Dp = 0, Mp = 0;
  bool wide_outputs = false;
};

template <typename In, typename Acc>
struct Diagonal {
  DiagonalArgs a;

  FWLAB_HD int64_t items() const { return a.heads * a.T; }
  // The padded row of item (h, t), and its row in the outputs.
  FWLAB_HD int64_t padded(int64_t item) const { return item / a.T * a.steps + item % a.T; }
  FWLAB_HD static Acc dot(const void* x, const void* z, int64_t at, int64_t width) {
    const In *xs = static_cast<const In*>(x) + at, *zs = static_cast<const In*>(z) + at;
    Acc sum = 0;
    for (int64_t j = 0; j < width; ++j) sum += convert<Acc>(xs[j]) * convert<Acc>(zs[j]);
    return sum;
  }
  // out[item, :width] = off[row, :] + c * x[row, :] (rows of width `stride` in the padded layout), out of type Out.
  template <typename Out>
  FWLAB_HD static void add_as(void* out, const void* off, Acc c, const void* x, int64_t item, int64_t row,
                              int64_t width, int64_t stride) {
    Out* to = static_cast<Out*>(out) + item * width;
    const Acc* from = static_cast<const Acc*>(off) + row * stride;
    const In* xs = static_cast<const In*>(x) + row * stride;
    for (int64_t i = 0; i < width; ++i) to[i] = convert<Out>(from[i] + c * convert<Acc>(xs[i]));
  }
  FWLAB_HD void add(void* out, const void* off, Acc c, const void* x, int64_t item, int64_t row, int64_t width,
                    int64_t stride) const {
    if (a.wide_outputs) return add_as<Acc>(out, off, c, x, item, row, width, stride);
    add_as<In>(out, off, c, x, item, row, width, stride);
  }
  FWLAB_HD void forward(int64_t item) const {
    const int64_t row = padded(item);
    add(a.y, a.y_off, dot(a.q, a.k, row * a.Mp, a.M), a.v, item, row, a.D, a.Dp);
  }
  FWLAB_HD void backward(int64_t item) const {
    const int64_t row = padded(item);
    const Acc qk = dot(a.q, a.k, row * a.Mp, a.M), dyv = dot(a.dy, a.v, row * a.Dp, a.D);
    add(a.dq, a.dq_off, dyv, a.k, item, row, a.M, a.Mp);
    add(a.dk, a.dk_off, dyv, a.q, item, row, a.M, a.Mp);
    add(a.dv, a.dv_off, qk, a.dy, item, row, a.D, a.Dp);
  }
};

}  // namespace fwlab::cuda

// Σ a[i] b[i] in 16 partial sums: a loop the compiler vectorises, which a single running sum is not (it may not
// reorder floating-point additions). For the hot loops of vector_clones.h's entry points.
#pragma once

#include <cstdint>

#include "kernels/common/vector_clones.h"

namespace fwlab::kernels {

template <typename T>
FWLAB_HOT T lane_dot(const T* a, const T* b, int64_t n) {
  T lanes[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; ++l) lanes[l] += a[i + l] * b[i + l];
  T sum = 0;
  for (; i < n; ++i) sum += a[i] * b[i];
  for (int l = 0; l < 16; ++l) sum += lanes[l];
  return sum;
}

}  // namespace fwlab::kernels

// e^x as plain float arithmetic, so that a loop over it vectorises (glibc's expf is a call per element unless the
// whole file is built with -ffast-math, which would also change how NaN and infinities behave elsewhere).
// Cody-Waite range reduction and Cephes' expf polynomial: within 2 ulp of e^x for x in [-87, 88]; outside, the
// argument is clamped there (e^-87 ~ 1.6e-38 stands for 0, e^88 ~ 1.7e38 for infinity), which the sigmoids and
// softmaxes built on it cannot tell apart. NaN stays NaN. tests/test_elementwise_kernels.cpp binds it to std::exp.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/common/vector_clones.h"

namespace fwlab::kernels {

FWLAB_HOT float exp_approx(float x) {
  x = x < -87.0f ? -87.0f : x;  // (a NaN fails both tests and stays)
  x = x > 88.0f ? 88.0f : x;
  // n = round(x / ln 2) by the 1.5 * 2^23 trick: the sum's low mantissa bits hold n.
  const float shifted = x * 1.44269504088896341f + 12582912.0f;
  const float n = shifted - 12582912.0f;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;  // x - n ln 2, ln 2 in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  const int32_t scale_bits = (bits - 0x4B400000 + 127) << 23;  // 2^n: n in [-126, 127] after the clamp
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  return p * scale;
}

// e^x in a kernel's element type: exp_approx in float32, std::exp in float64 (the precision its tests check in).
FWLAB_HOT float vector_exp(float x) { return exp_approx(x); }
FWLAB_HOT double vector_exp(double x) { return std::exp(x); }

}  // namespace fwlab::kernels

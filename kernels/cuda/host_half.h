// 16-bit stages for the chunked kernel's host runs (kernels/decay/cuda/chunks_host.h), so that the host rounds the
// tensor-core operands as the GPU does: HostBf16 holds bfloat16 bits (the upper half of a float, rounded to nearest
// even, as
// __float2bfloat16); fp16 is the compiler's _Float16 where it has one (GCC and clang on x86-64 and aarch64), whose
// conversions round to nearest and overflow to infinity like __float2half. Host code only: never on the GPU.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/decay/cuda/chunks.h"

namespace fwlab::cuda {

struct HostBf16 {
  uint16_t bits;
};

template <>
inline HostBf16 convert<HostBf16, float>(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return HostBf16{uint16_t((u >> 16) | 0x40u)};  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);                                                    // round to nearest even
  return HostBf16{uint16_t(u >> 16)};
}

template <>
inline float convert<float, HostBf16>(HostBf16 x) {
  const uint32_t u = uint32_t(x.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

#if defined(__FLT16_MAX__)
#define FWLAB_HOST_FP16 1
using HostFp16 = _Float16;
#endif

}  // namespace fwlab::cuda

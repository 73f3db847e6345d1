#include "kernels/common/transpose_cpu.h"

#include <stdexcept>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FWLAB_TRANSPOSE_X86 1
#endif

namespace fwlab::kernels {

namespace {

#ifdef FWLAB_TRANSPOSE_X86
// GCC 12's intrinsics trip its -Wuninitialized where they are inlined (_mm512_undefined_ps initialises a value from
// itself): silenced for the block functions only, so that a unity batch's later files keep the warning.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
// One 16 x 16 block: pairs of rows interleaved (32-bit, then 64-bit elements), then 128-bit lanes exchanged twice.
__attribute__((target("avx512f"))) void block16(const float* in, int64_t ld_in, float* out, int64_t ld_out) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(in + i * ld_in);
  for (int i = 0; i < 16; i += 2)
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44), r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44), r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int h = 0; h < 16; h += 8)
    for (int i = 0; i < 4; ++i) {
      t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
      t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xDD);
    }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
  }
  for (int i = 0; i < 16; ++i) _mm512_storeu_ps(out + i * ld_out, r[i]);
}

// One 8 x 8 block, the same three stages in 256-bit registers.
__attribute__((target("avx2"))) void block8(const float* in, int64_t ld_in, float* out, int64_t ld_out) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(in + i * ld_in);
  for (int i = 0; i < 8; i += 2)
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44), r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44), r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i)
    t[i] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x20), t[i + 4] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x31);
  for (int i = 0; i < 8; ++i) _mm256_storeu_ps(out + i * ld_out, t[i]);
}
#pragma GCC diagnostic pop
#endif

// The full blocks of side B with `block`, then what they left (the columns right of them, the rows below) plainly.
template <int B, typename Block>
void blocked(int64_t rows, int64_t cols, const float* in, int64_t ld_in, float* out, int64_t ld_out, Block block) {
  const int64_t full_rows = rows / B * B, full_cols = cols / B * B;
  for (int64_t i = 0; i < full_rows; i += B)
    for (int64_t j = 0; j < full_cols; j += B) block(in + i * ld_in + j, ld_in, out + j * ld_out + i, ld_out);
  transpose_plain(full_rows, cols - full_cols, in + full_cols, ld_in, out + full_cols * ld_out, ld_out);
  transpose_plain(rows - full_rows, cols, in + full_rows * ld_in, ld_in, out + full_rows, ld_out);
}

// The path, unchecked: transpose_cpu passes the CPU's widest, the tests a checked one.
void transpose_on(CpuIsa isa, int64_t rows, int64_t cols, const float* in, int64_t ld_in, float* out, int64_t ld_out) {
#ifdef FWLAB_TRANSPOSE_X86
  if (isa == CpuIsa::avx512) return blocked<16>(rows, cols, in, ld_in, out, ld_out, block16);
  if (isa == CpuIsa::avx2) return blocked<8>(rows, cols, in, ld_in, out, ld_out, block8);
#endif
  transpose_plain(rows, cols, in, ld_in, out, ld_out);
}

}  // namespace

void transpose_cpu_with(CpuIsa isa, int64_t rows, int64_t cols, const float* in, int64_t ld_in, float* out,
                        int64_t ld_out) {
  if (!cpu_has(isa)) throw std::invalid_argument("transpose_cpu_with: this CPU lacks the instruction set named");
  transpose_on(isa, rows, cols, in, ld_in, out, ld_out);
}

void transpose_cpu(int64_t rows, int64_t cols, const float* in, int64_t ld_in, float* out, int64_t ld_out) {
  transpose_on(widest_cpu_isa(), rows, cols, in, ld_in, out, ld_out);
}

void transpose_cpu(int64_t rows, int64_t cols, const double* in, int64_t ld_in, double* out, int64_t ld_out) {
  transpose_plain(rows, cols, in, ld_in, out, ld_out);
}

}  // namespace fwlab::kernels

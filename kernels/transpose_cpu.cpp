#include "kernels/transpose_cpu.h"

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12's own intrinsics header trips its -Wuninitialized (_mm512_undefined_ps initialises a value from itself);
// pushed and popped, so that a unity batch's later files keep the warning.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#define FWLAB_TRANSPOSE_AVX512 1
#endif

namespace fwlab::kernels {

namespace {

#ifdef FWLAB_TRANSPOSE_AVX512
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

bool has_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}
#endif

}  // namespace

void transpose_cpu(int64_t rows, int64_t cols, const float* in, int64_t ld_in, float* out, int64_t ld_out) {
  int64_t full_rows = 0, full_cols = 0;
#ifdef FWLAB_TRANSPOSE_AVX512
  if (has_avx512()) {
    full_rows = rows / 16 * 16, full_cols = cols / 16 * 16;
    for (int64_t i = 0; i < full_rows; i += 16)
      for (int64_t j = 0; j < full_cols; j += 16) block16(in + i * ld_in + j, ld_in, out + j * ld_out + i, ld_out);
  }
#endif
  // What the blocks left: the columns right of them, then the rows below.
  transpose_plain(full_rows, cols - full_cols, in + full_cols, ld_in, out + full_cols * ld_out, ld_out);
  transpose_plain(rows - full_rows, cols, in + full_rows * ld_in, ld_in, out + full_rows, ld_out);
}

void transpose_cpu(int64_t rows, int64_t cols, const double* in, int64_t ld_in, double* out, int64_t ld_out) {
  transpose_plain(rows, cols, in, ld_in, out, ld_out);
}

}  // namespace fwlab::kernels

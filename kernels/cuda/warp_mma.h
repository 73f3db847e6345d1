// One warp's tensor-core product, mma.sync m16n8k16 (bf16 or fp16 operands, fp32 accumulation): D[16, 8] =
// A[16, 16] B[16, 8] + C, each operand spread over the warp's 32 lanes as the PTX ISA lays it out ("Matrix Fragments
// for mma.m16n8k16 with floating point type"). The block programs hold the fragments themselves, so that the
// gate scalings and masks act on registers between products instead of going through shared memory (what WMMA's
// opaque fragments forced on kernels/decay/cuda/chunks.h).
//
// The layout lives here once, as functions of (lane, element), and both sides use it: the GPU loads fragments with it
// and runs the instruction; the host (kernels/cuda/warp_mma_host.h) rebuilds A and B from every lane's fragment with
// the same functions and hands each lane the elements of D the hardware would give it. A load that put an element
// in the wrong slot therefore gives a wrong product on the host too, in float64, on a machine with no GPU.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/decay/cuda/chunks.h"  // BlockCtx, convert, FWLAB_HD

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>
#endif

namespace fwlab::cuda {

constexpr int kWarp = 32;

// Element i of lane l's fragments: groupID g = l / 4 picks the row (A, C) or column (B), the lane's place in its
// group t = l % 4 the pair of columns (A, C) or rows (B).
FWLAB_HD inline int mma_a_row(int lane, int i) { return (lane >> 2) + ((i >> 1) & 1) * 8; }
FWLAB_HD inline int mma_a_col(int lane, int i) { return (lane & 3) * 2 + (i & 1) + (i >> 2) * 8; }
FWLAB_HD inline int mma_b_row(int lane, int i) { return (lane & 3) * 2 + (i & 1) + (i >> 1) * 8; }
FWLAB_HD inline int mma_b_col(int lane, int) { return lane >> 2; }
FWLAB_HD inline int mma_c_row(int lane, int i) { return (lane >> 2) + (i >> 1) * 8; }
FWLAB_HD inline int mma_c_col(int lane, int i) { return (lane & 3) * 2 + (i & 1); }

// A lane's share of each operand; elements in PTX order (pairs of consecutive elements fill one 32-bit register,
// the first in its low half).
template <typename In>
struct alignas(16) FragA {
  In x[8];
};
template <typename In>
struct alignas(8) FragB {
  In x[4];
};
template <typename Acc>
struct FragC {
  Acc x[4] = {Acc(0), Acc(0), Acc(0), Acc(0)};
};

// Fragments of A (rows r0.., columns k0.. of `at(row, col)`) and of B (rows k0.., columns c0..), converted to In; the
// accessor owns the bounds (zeros past the matrix's edge).
template <typename In, typename At>
FWLAB_HD FragA<In> load_a(int lane, int64_t r0, int64_t k0, const At& at) {
  FragA<In> f;
  for (int i = 0; i < 8; ++i) f.x[i] = convert<In>(at(r0 + mma_a_row(lane, i), k0 + mma_a_col(lane, i)));
  return f;
}
template <typename In, typename At>
FWLAB_HD FragB<In> load_b(int lane, int64_t k0, int64_t c0, const At& at) {
  FragB<In> f;
  for (int i = 0; i < 4; ++i) f.x[i] = convert<In>(at(k0 + mma_b_row(lane, i), c0 + mma_b_col(lane, i)));
  return f;
}

// An operand element as the host's stand-in for the instruction takes it (BlockCtx::host_mma: every lane's operands
// as doubles through the warp's exchange).
template <typename In>
FWLAB_HD double mma_host_value(In x) {
  return double(convert<float>(x));
}
template <>
FWLAB_HD inline double mma_host_value<double>(double x) {
  return x;
}

// c += a b for the calling warp. Every lane of the warp calls it together (as the instruction demands).
template <typename In, typename Acc>
FWLAB_HD void mma(const BlockCtx& ctx, const FragA<In>& a, const FragB<In>& b, FragC<Acc>& c) {
#if defined(__CUDA_ARCH__)
#if __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<Acc, float> && (std::is_same_v<In, __nv_bfloat16> || std::is_same_v<In, __half>)) {
    uint32_t ra[4], rb[2];  // copied, not cast: register moves once compiled, and no aliasing through another type
    memcpy(ra, a.x, sizeof ra);
    memcpy(rb, b.x, sizeof rb);
    if constexpr (std::is_same_v<In, __nv_bfloat16>)
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};\n"
          : "+f"(c.x[0]), "+f"(c.x[1]), "+f"(c.x[2]), "+f"(c.x[3])
          : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]));
    else
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};\n"
          : "+f"(c.x[0]), "+f"(c.x[1]), "+f"(c.x[2]), "+f"(c.x[3])
          : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]));
    return;
  }
#endif
  __trap();  // no tensor-core instruction for these types here: the launch must not choose this program
#else
  double da[8], db[4], dc[4];
  for (int i = 0; i < 8; ++i) da[i] = mma_host_value(a.x[i]);
  for (int i = 0; i < 4; ++i) db[i] = mma_host_value(b.x[i]), dc[i] = double(c.x[i]);
  ctx.host_mma(ctx.host_warps, ctx.tid, da, db, dc);
  for (int i = 0; i < 4; ++i) c.x[i] = Acc(dc[i]);
#endif
}

// Whole depth of the product: the default k range of block_mma.
struct FullDepth {
  int64_t depth;
  FWLAB_HD int64_t begin(int64_t, int64_t) const { return 0; }
  FWLAB_HD int64_t end(int64_t, int64_t) const { return depth; }
};

// C[m, n] = A[m, depth] B[depth, n] by the block's warps, one 16 x 8 tile of C per warp at a time; each element of C
// inside [m, n) goes to done(row, col, value) in registers (to scale, mask, add and store it). `range` may narrow a
// tile's depth (range.begin(r0, c0) .. range.end(r0, c0), rounded out to 16): causal products skip zero blocks.
// The accessors give zeros outside the matrices.
template <typename In, typename Acc, typename AAt, typename BAt, typename Done, typename Range = FullDepth>
FWLAB_HD void block_mma(const BlockCtx& ctx, int64_t m, int64_t n, const AAt& a, const BAt& b, const Done& done,
                        const Range& range) {
  const int lane = ctx.lane();
  const int64_t col_tiles = (n + 7) / 8, tiles = (m + 15) / 16 * col_tiles;
  for (int64_t tile = ctx.warp(); tile < tiles; tile += ctx.warps()) {
    const int64_t r0 = tile / col_tiles * 16, c0 = tile % col_tiles * 8;
    FragC<Acc> acc;
    for (int64_t k0 = range.begin(r0, c0) / 16 * 16; k0 < range.end(r0, c0); k0 += 16)
      mma(ctx, load_a<In>(lane, r0, k0, a), load_b<In>(lane, k0, c0, b), acc);
    for (int e = 0; e < 4; ++e) {
      const int64_t r = r0 + mma_c_row(lane, e), c = c0 + mma_c_col(lane, e);
      if (r < m && c < n) done(r, c, acc.x[e]);
    }
  }
}
template <typename In, typename Acc, typename AAt, typename BAt, typename Done>
FWLAB_HD void block_mma(const BlockCtx& ctx, int64_t m, int64_t n, int64_t depth, const AAt& a, const BAt& b,
                        const Done& done) {
  block_mma<In, Acc>(ctx, m, n, a, b, done, FullDepth{depth});
}

}  // namespace fwlab::cuda

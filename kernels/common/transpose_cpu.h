// out = in^T for row-major matrices with leading dimensions: in is rows x cols, out cols x rows. The chunked delta
// kernel turns its three A B^T products with a state (the BLAS's slowest small-matrix form) into A B products with
// the state transposed once per chunk (kernels/delta/chunk_cpu.cpp).
#pragma once

#include <cstdint>

#include "kernels/common/cpu_isa.h"

namespace fwlab::kernels {

// float: 16 x 16 blocks in AVX-512 registers, or 8 x 8 in AVX2 ones, where the CPU has them; the plain loop, its
// twin, everywhere else.
void transpose_cpu(int64_t rows, int64_t cols, const float* in, int64_t ld_in, float* out, int64_t ld_out);
void transpose_cpu(int64_t rows, int64_t cols, const double* in, int64_t ld_in, double* out, int64_t ld_out);

// The same transpose with the instruction set named (the tests run each the CPU has; one it lacks is refused with
// std::invalid_argument).
void transpose_cpu_with(CpuIsa isa, int64_t rows, int64_t cols, const float* in, int64_t ld_in, float* out,
                        int64_t ld_out);

// The twin: one element at a time.
template <typename T>
void transpose_plain(int64_t rows, int64_t cols, const T* in, int64_t ld_in, T* out, int64_t ld_out) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) out[j * ld_out + i] = in[i * ld_in + j];
}

}  // namespace fwlab::kernels

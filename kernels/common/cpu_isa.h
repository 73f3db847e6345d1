// The x86 vector instruction sets the hand-written CPU kernels (kernels/common/transpose_cpu.h,
// kernels/common/small_gemm_cpu.h) have paths for, and which of them this CPU runs. Each such kernel keeps a plain twin
// (CpuIsa::plain) that runs everywhere, and lets the tests name a path so that every one the CPU has is bound to its
// twin.
#pragma once

namespace fwlab::kernels {

enum class CpuIsa { plain, avx2, avx512 };  // avx2: AVX2 with FMA; avx512: AVX-512F

bool cpu_has(CpuIsa isa);
CpuIsa widest_cpu_isa();

}  // namespace fwlab::kernels

#include "kernels/common/cpu_isa.h"

namespace fwlab::kernels {

bool cpu_has(CpuIsa isa) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (isa == CpuIsa::avx512) return __builtin_cpu_supports("avx512f");
  if (isa == CpuIsa::avx2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  return isa == CpuIsa::plain;
}

CpuIsa widest_cpu_isa() {
  static const CpuIsa widest = cpu_has(CpuIsa::avx512) ? CpuIsa::avx512
                               : cpu_has(CpuIsa::avx2) ? CpuIsa::avx2
                                                       : CpuIsa::plain;
  return widest;
}

}  // namespace fwlab::kernels

// Which OpenBLAS kernels the process's matrix products run. OpenBLAS picks them once, when it loads, from the CPU's
// family and model; a CPU it does not know (a VM's "Intel(R) Xeon(R) Processor", newer than its table) gets the
// generic Prescott (SSE3) kernels: measured here at 14-20 GFLOP/s on one thread against 70 for the SkylakeX kernels
// the same AVX-512 CPU runs, so every layer's sgemm ran 3-5x slower than the machine allows. OPENBLAS_CORETYPE
// overrides the choice, but only at load time, so a program that finds itself on the fallback restarts itself
// with the core its CPU's features allow.
#pragma once

#include <string>

namespace fwlab {

// The core name OpenBLAS chose ("SkylakeX", "Haswell", "Prescott", ...); "" when the BLAS is not OpenBLAS.
std::string blas_core();

// Called first in main() (or from a static initializer): when OpenBLAS fell back to Prescott on a CPU with AVX-512
// (SkylakeX's AVX512F, BW, DQ, VL) or AVX2 and FMA (Haswell), sets OPENBLAS_CORETYPE to that core and execs the
// program again, same pid and arguments (read from /proc/self/cmdline; once: the variable set means the choice was
// made). Otherwise returns at once. Returns the core the process runs.
std::string use_the_cpus_blas_kernels();

}  // namespace fwlab

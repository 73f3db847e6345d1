// How the process's allocator treats large freed blocks, set once at start by the programs that train
// (fwlab-worker) and by the benchmarks, so both measure the same thing.
#pragma once

#include <malloc.h>

namespace fwlab {

// glibc gives large freed blocks back to the OS at once (munmap, or a trim of the heap top), so every training
// step page-faults its activations and gradients in anew: measured here as a third of the fused decay kernel's
// forward + backward (B4 H4 T1024 D=M=32: 12.5 ms, 11.2 ms once memory is kept) and as the reason its time grew
// faster than T. Blocks up to 32 MiB (glibc's ceiling for this threshold) now come from the heap and stay
// mapped; the heap top is trimmed only beyond 512 MiB.
inline void keep_freed_memory_mapped() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
}

}  // namespace fwlab

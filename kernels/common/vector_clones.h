// Hot CPU loops compiled once per instruction set: FWLAB_VECTOR_CLONES entry points are cloned for AVX-512F, AVX2
// and baseline SSE2 (target_clones) and the loader picks the widest the CPU has, so one binary runs everywhere;
// FWLAB_HOT helpers are inlined into each clone. Feature clones, not "arch=" ones: those are matched by CPU model
// and fell back to SSE2 on an AMD EPYC.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#define FWLAB_HOT inline __attribute__((always_inline))
#define FWLAB_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define FWLAB_HOT inline
#define FWLAB_VECTOR_CLONES
#endif

// The shapes at which the GPU tests (tests/gpu/test_gpu.cpp) call the chunked CUDA kernel directly, in one place so
// that a host test (tests/test_cuda_host_paths.cpp) checks that every one fits the shared memory of each GPU the
// tests must pass on. The kernel's scratch per block grows with D, M and the dtype (fp64 with D = M = 64 needs
// 192 KiB); a direct call that does not fit is refused, and models fall back to the libtorch form instead.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace fwlab::test {

// Opt-in shared memory per block: A100 (sm_80) 163 KiB, H100 (sm_90) 227 KiB.
constexpr int64_t kSharedBytesSm80 = 163 * 1024, kSharedBytesSm90 = 227 * 1024;

struct ChunkedShape {
  int64_t M, D;
};

// The shapes of the every-gate-layout sweep, per dtype: fp64 at D = 32 (D = 64 needs 192 KiB, over an A100's).
inline ChunkedShape chunked_sweep_shape(torch::ScalarType dtype) {
  return dtype == torch::kFloat64 ? ChunkedShape{32, 32} : ChunkedShape{32, 64};
}

// The extremes: m = 64 in bf16 and D = 65 (attention normalisation's extra row) in fp32.
constexpr ChunkedShape kChunkedWideKeys{64, 64}, kChunkedOddRows{32, 65};

struct ChunkedCall {
  torch::ScalarType dtype;
  ChunkedShape shape;
};

inline std::vector<ChunkedCall> chunked_test_calls() {
  std::vector<ChunkedCall> calls;
  for (auto dtype : {torch::kFloat64, torch::kFloat32, torch::kBFloat16, torch::kFloat16})
    calls.push_back({dtype, chunked_sweep_shape(dtype)});
  calls.push_back({torch::kBFloat16, kChunkedWideKeys});
  calls.push_back({torch::kFloat32, kChunkedOddRows});
  return calls;
}

}  // namespace fwlab::test

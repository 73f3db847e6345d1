// A custom decay-recurrence kernel against libtorch's own chunked form (decay_recurrence_chunked) on the same
// device and the same inputs: outputs, final state and the gradient of every input. The libtorch form is plain
// tensor ops that libtorch's own kernels run, so it is the reference a user's GPU can be trusted with. Used by
// `fwlab doctor` (every kernel at the shapes users train) and by the first-use self-check (kernel_guard.h).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>

#include "kernels/decay/decay.h"

namespace fwlab::kernels {

using DecayKernel = std::function<RecurrenceResult(const torch::Tensor& q, const torch::Tensor& k,
                                                   const torch::Tensor& v, const torch::Tensor& log_a,
                                                   const torch::Tensor& log_b, const torch::Tensor& state0)>;

// The inputs of one comparison. value_gate: 0 none, 1 one per head (a_t [.., 1]), 2 one per state row;
// log-gates are log sigmoid(N(0, 1) + 1) * strength (0: every gate exactly 1, no decay).
struct DecayCase {
  int64_t B = 1, H = 2, T = 80, D = 16, M = 16;
  torch::ScalarType dtype = torch::kFloat32;
  torch::Device device = torch::kCPU;
  int value_gate = 2;
  bool key_gate = true;
  double strength = 1.0;
  uint64_t seed = 0;
};

struct KernelComparison {
  double max_error = 0;  // the largest |kernel - libtorch| / max |libtorch| over y, the state and every gradient
  std::string worst;     // which of those it was (y, state, dq, dk, dv, dlog_a, dlog_b, dstate0)
  double tolerance = 0;
  double kernel_ms = 0, reference_ms = 0;  // one forward + backward each, the best of `repeats`
  bool passed() const { return max_error <= tolerance; }
};

// fp64 1e-9, fp32 1e-4, bf16 / fp16 2e-2 (of the largest magnitude; the GPU tests' bounds).
double kernel_tolerance(torch::ScalarType dtype);
// max |a - b| over max |b| (at least 1e-6), in float64 on the CPU; infinite where it is NaN, 0 for empty tensors.
double relative_gap(const torch::Tensor& a, const torch::Tensor& b);

// Runs both on the case's inputs. The reference sees the inputs rounded to the case's dtype and computes in fp32
// (fp64 for fp64), so only the kernel's own arithmetic is measured. Inputs come from a private generator and
// autocast is off inside, so a check in the middle of a training step changes nothing around it.
KernelComparison compare_with_libtorch(const DecayKernel& kernel, const DecayCase& c, int repeats = 1);

}  // namespace fwlab::kernels

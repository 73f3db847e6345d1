// Whether a tensor's current CUDA stream is capturing a CUDA graph. A kernel's first-use check synchronises and
// allocates outside the graph's pool, which would break the capture, so a class first met during a capture keeps
// libtorch's form (kernels/decay/kernel_guard.h).
#pragma once

#include <torch/torch.h>

namespace fwlab::kernels {

// False for a tensor off the GPU and in builds without CUDA kernels.
bool cuda_graph_capturing(const torch::Tensor& t);

}  // namespace fwlab::kernels

// Compiled with the CUDA bindings' definitions (kernels/CMakeLists.txt): only there is the CUDA runtime reachable.
#include "kernels/cuda_capture.h"

#if defined(FWLAB_HAVE_CUDA)
#include "kernels/cuda_stream.h"
#endif

namespace fwlab::kernels {

bool cuda_graph_capturing(const torch::Tensor& t) {
#if defined(FWLAB_HAVE_CUDA)
  if (!t.defined() || !t.is_cuda()) return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(current_cuda_stream(t.get_device()), &status) == cudaSuccess &&
         status != cudaStreamCaptureStatusNone;
#else
  (void)t;
  return false;
#endif
}

}  // namespace fwlab::kernels

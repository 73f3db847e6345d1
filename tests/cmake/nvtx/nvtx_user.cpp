// Built through CUDA::nvToolsExt (tests/cmake/nvtx): the header-only NVTX 3 API the shim points it at.
#include <nvtx3/nvToolsExt.h>

int main() {
  nvtxRangePushA("fwlab");
  nvtxRangePop();
  return 0;
}

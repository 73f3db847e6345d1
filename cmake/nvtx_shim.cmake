# CUDA::nvToolsExt for PyTorch <= 2.7 with CUDA >= 12.9 (pytorch/pytorch issue #152756).
#
# CUDA 12.9 removed the NVTX v2 library (libnvToolsExt.so); NVTX 3 is header-only (<nvtx3/nvToolsExt.h>), and
# FindCUDAToolkit then defines CUDA::nvtx3 (CMake >= 3.25) but no CUDA::nvToolsExt. PyTorch's installed
# Caffe2/public/cuda.cmake up to 2.7 looks for nvtx3 only under the consuming project's third_party/ (a
# PROJECT_SOURCE_DIR path, pytorch #147220), falls back to "torch::nvtoolsext -> CUDA::nvToolsExt", and
# find_package(Torch) then fails on the missing target. PyTorch fixed it on its side by always using NVTX 3
# (pytorch PR #153784, merged June 2025, reusing CUDA::nvtx3). For the older ones, the workaround used
# downstream (vllm-project/vllm #20892, tatsy/torchmcubes #26, after discuss.pytorch.org/t/179635) is done here:
# before find_package(Torch), where the toolkit has no nvToolsExt library, CUDA::nvToolsExt becomes an INTERFACE
# target over the header-only CUDA::nvtx3, with TORCH_CUDA_USE_NVTX3 so torch's headers take the nvtx3 include.
# Needs find_package(CUDAToolkit) first; a no-op where the library exists (CUDA <= 12.8) or without a toolkit.
# Sets FWLAB_NVTX_SHIM to ON where it made the target.
function(fwlab_nvtx_shim)
  set(FWLAB_NVTX_SHIM OFF PARENT_SCOPE)
  if(NOT CUDAToolkit_FOUND OR TARGET CUDA::nvToolsExt)
    return()
  endif()
  if(NOT TARGET CUDA::nvtx3)  # FindCUDAToolkit defines it from CMake 3.25 on; this is its definition
    add_library(CUDA::nvtx3 INTERFACE IMPORTED)
    target_include_directories(CUDA::nvtx3 SYSTEM INTERFACE "${CUDAToolkit_INCLUDE_DIRS}")
    target_link_libraries(CUDA::nvtx3 INTERFACE ${CMAKE_DL_LIBS})
  endif()
  add_library(CUDA::nvToolsExt INTERFACE IMPORTED)
  target_link_libraries(CUDA::nvToolsExt INTERFACE CUDA::nvtx3)
  target_compile_definitions(CUDA::nvToolsExt INTERFACE TORCH_CUDA_USE_NVTX3)
  set(FWLAB_NVTX_SHIM ON PARENT_SCOPE)
  message(STATUS "fwlab: CUDA ${CUDAToolkit_VERSION} has no nvToolsExt library; CUDA::nvToolsExt -> CUDA::nvtx3 "
                 "(header-only NVTX 3) for libtorch <= 2.7 (pytorch issue #152756)")
endfunction()

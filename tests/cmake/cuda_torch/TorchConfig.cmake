# A stand-in for a CUDA libtorch's TorchConfig.cmake (a PyTorch 2.4-2.7 wheel), for tests/cmake/cuda_torch/run.sh:
# what its Caffe2/public/cuda.cmake does to the consuming project, and no library. It enables CUDA and finds the
# toolkit itself; finds nvtx3 only under the consumer's third_party/ (never, here), so torch::nvtoolsext links
# CUDA::nvToolsExt, which CUDA >= 12.9 lacks; turns TORCH_CUDA_ARCH_LIST into -gencode flags in CMAKE_CUDA_FLAGS
# and sets CMAKE_CUDA_ARCHITECTURES OFF; and asks for the pre-C++11 string ABI.
include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  message(FATAL_ERROR "stand-in libtorch: no CUDA compiler")
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
if(NOT CMAKE_CUDA_COMPILER_VERSION VERSION_EQUAL CUDAToolkit_VERSION)
  message(FATAL_ERROR "Found two conflicting CUDA versions: ${CMAKE_CUDA_COMPILER_VERSION} and ${CUDAToolkit_VERSION}")
endif()

find_path(nvtx3_dir NAMES nvtx3 PATHS "${PROJECT_SOURCE_DIR}/third_party/NVTX/c/include" NO_DEFAULT_PATH)
add_library(torch::nvtoolsext INTERFACE IMPORTED)
if(nvtx3_dir)
  target_include_directories(torch::nvtoolsext INTERFACE "${nvtx3_dir}")
else()
  set_property(TARGET torch::nvtoolsext PROPERTY INTERFACE_LINK_LIBRARIES CUDA::nvToolsExt)
endif()

if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST $ENV{TORCH_CUDA_ARCH_LIST})
endif()
foreach(arch IN LISTS TORCH_CUDA_ARCH_LIST)
  string(REPLACE "." "" arch "${arch}")
  string(APPEND CMAKE_CUDA_FLAGS " -gencode arch=compute_${arch},code=sm_${arch}")
endforeach()
set(CMAKE_CUDA_ARCHITECTURES OFF)

add_library(torch INTERFACE IMPORTED)
set_property(TARGET torch PROPERTY INTERFACE_LINK_LIBRARIES torch::nvtoolsext)
set(TORCH_LIBRARIES torch)
set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=0")
set(Torch_FOUND TRUE)

# CUDA kernels (kernels/cuda/): built where nvcc is found, never required. FWLAB_CUDA = AUTO (default: where nvcc is
# on PATH, in $CUDACXX or at /usr/local/cuda/bin), ON (an error without nvcc) or OFF. The kernels are plain CUDA
# with a C++ API (no libtorch), so a CPU-only libtorch builds them too; their GPU tests skip without a device.
set(FWLAB_CUDA AUTO CACHE STRING "build the CUDA kernels: AUTO, ON or OFF")
set(FWLAB_HAVE_CUDA OFF)
if(NOT FWLAB_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    find_program(FWLAB_NVCC_ON_PATH nvcc)
    if(NOT FWLAB_NVCC_ON_PATH)
      set(ENV{CUDACXX} /usr/local/cuda/bin/nvcc)  # the CUDA Toolkit's default place, often not on PATH
    endif()
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)  # A100 and H100 class; override with -DCMAKE_CUDA_ARCHITECTURES=...
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(FWLAB_HAVE_CUDA ON)
    message(STATUS "fwlab: CUDA kernels enabled (${CMAKE_CUDA_COMPILER}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
  elseif(FWLAB_CUDA STREQUAL "ON")
    message(FATAL_ERROR "FWLAB_CUDA=ON but no CUDA compiler (nvcc) was found; set CUDACXX or use FWLAB_CUDA=AUTO")
  else()
    message(STATUS "fwlab: no CUDA compiler found; the CUDA kernels are not built")
  endif()
endif()

# CUDA kernels (kernels/<op>/cuda/; what they share in kernels/cuda/): built where nvcc is found, never required.
# FWLAB_CUDA = AUTO (default: where nvcc is on PATH, in $CUDACXX or at /usr/local/cuda/bin), ON (an error without
# nvcc) or OFF. The kernels are plain CUDA with a C++ API (no libtorch), so a CPU-only libtorch builds them too;
# their GPU tests skip without a device.
#
# Included BEFORE find_package(Torch): a CUDA libtorch's config enables CUDA and runs find_package(CUDAToolkit)
# itself, so the nvcc and toolkit must be chosen (the ones of torch's CUDA version) and the NVTX shim be in place
# before it runs. The architecture list is settled after it (fwlab_cuda_resolve_archs in the top CMakeLists.txt),
# since torch's cuda.cmake replaces CMAKE_CUDA_ARCHITECTURES with -gencode flags of its own.
include(${CMAKE_CURRENT_LIST_DIR}/cuda_toolkit.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/nvtx_shim.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/cuda_arch.cmake)

set(FWLAB_CUDA AUTO CACHE STRING "build the CUDA kernels: AUTO, ON or OFF")
option(FWLAB_CUDA_TENSOR_CORES "require an sm_80+ architecture for the CUDA kernels' tensor-core paths" ON)
set(FWLAB_HAVE_CUDA OFF)

# torch's CUDA version ("" for a CPU libtorch such as Debian's: then nothing below changes). Where it is known and
# no compiler is chosen yet, that version's nvcc in its default place is preferred: torch's config and ours then
# both take it (CUDACXX is what enable_language reads).
fwlab_torch_cuda_version(FWLAB_TORCH_CUDA_VERSION)
if(FWLAB_TORCH_CUDA_VERSION)
  message(STATUS "fwlab: libtorch built with CUDA ${FWLAB_TORCH_CUDA_VERSION} (${FWLAB_TORCH_CUDA_VERSION_FROM})")
  if(NOT DEFINED ENV{CUDACXX} AND NOT CMAKE_CUDA_COMPILER)
    fwlab_nvcc_for_cuda_version(_fwlab_nvcc "${FWLAB_TORCH_CUDA_VERSION}" /usr/local)
    if(_fwlab_nvcc)
      set(ENV{CUDACXX} "${_fwlab_nvcc}")
    endif()
  endif()
endif()

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
    fwlab_cuda_version_mismatch(_fwlab_error
      "${FWLAB_TORCH_CUDA_VERSION}" "libtorch (${FWLAB_TORCH_CUDA_VERSION_FROM})"
      "${CMAKE_CUDA_COMPILER_VERSION}" "the CUDA compiler ${CMAKE_CUDA_COMPILER}")
    if(_fwlab_error)
      message(FATAL_ERROR "${_fwlab_error}")
    endif()
    # CUDA::cudart from the toolkit of that nvcc (CMake reads its root from nvcc itself, so a wrapper such as
    # ccache's nvcc still names the real one), not another one found on the way.
    if(NOT DEFINED CUDAToolkit_ROOT AND CMAKE_CUDA_COMPILER_TOOLKIT_ROOT)
      set(CUDAToolkit_ROOT "${CMAKE_CUDA_COMPILER_TOOLKIT_ROOT}")
    endif()
    find_package(CUDAToolkit REQUIRED)
    fwlab_cuda_version_mismatch(_fwlab_error
      "${CMAKE_CUDA_COMPILER_VERSION}" "the CUDA compiler ${CMAKE_CUDA_COMPILER}"
      "${CUDAToolkit_VERSION}" "the CUDA toolkit (CUDA::cudart) in ${CUDAToolkit_LIBRARY_DIR}")
    if(_fwlab_error)  # only where CUDAToolkit_ROOT names another toolkit than the compiler's
      message(FATAL_ERROR "${_fwlab_error}")
    endif()
    fwlab_nvtx_shim()
    set(FWLAB_HAVE_CUDA ON)
    message(STATUS "fwlab: CUDA kernels enabled (${CMAKE_CUDA_COMPILER}, CUDA ${CMAKE_CUDA_COMPILER_VERSION})")
  elseif(FWLAB_CUDA STREQUAL "ON")
    message(FATAL_ERROR "FWLAB_CUDA=ON but no CUDA compiler (nvcc) was found; set CUDACXX or use FWLAB_CUDA=AUTO")
  else()
    message(STATUS "fwlab: no CUDA compiler found; the CUDA kernels are not built")
  endif()
endif()

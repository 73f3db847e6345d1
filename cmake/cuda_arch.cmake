# Which GPU architectures the CUDA kernels are really compiled for, and a refusal when the tensor-core paths cannot
# run on any of them.
#
# Why: the list does not always come from CMAKE_CUDA_ARCHITECTURES. With a CUDA libtorch, find_package(Torch)
# runs PyTorch's Caffe2/public/cuda.cmake, which sets CMAKE_CUDA_ARCHITECTURES OFF and appends its own
# "-gencode arch=compute_XX,code=sm_XX" flags (from TORCH_CUDA_ARCH_LIST, or detection) to CMAKE_CUDA_FLAGS, so
# cmake/cuda.cmake's sm_80/sm_90 default no longer applies. Where neither gives an architecture, nvcc's own default
# applies (sm_75 for CUDA 13, sm_52 for CUDA 11 and 12), and kernels/decay/cuda/chunks.h takes its WMMA bf16
# path only under __CUDA_ARCH__ >= 800: such a build would silently run the scalar loops.
#
# Architectures are kept as tokens: sm_XX (device code for that GPU) and compute_XX (PTX, JIT-compiled on that GPU
# or a later one). XX keeps a suffix (90a, 100f). Everything here is a function of its arguments so that
# tests/cmake/cuda_arch_test.cmake can run it under cmake -P.

# Tokens of one architecture value as nvcc's -arch or CMake's CUDA_ARCHITECTURES entries write it.
# Returns "all", "all-major" or "native" unchanged: those depend on the compiler or the machine.
function(fwlab_cuda_arch_tokens out value)
  set(tokens "")
  if(value MATCHES "^(all|all-major|native)$")
    set(tokens "${value}")
  elseif(value MATCHES "^sm_([0-9]+[a-z]?)$")  # -arch=sm_XX is -arch=compute_XX -code=sm_XX,compute_XX
    set(tokens "sm_${CMAKE_MATCH_1}" "compute_${CMAKE_MATCH_1}")
  elseif(value MATCHES "^compute_([0-9]+[a-z]?)$")
    set(tokens "compute_${CMAKE_MATCH_1}")
  elseif(value MATCHES "^([0-9]+[a-z]?)-real$")  # CMake: real only
    set(tokens "sm_${CMAKE_MATCH_1}")
  elseif(value MATCHES "^([0-9]+[a-z]?)-virtual$")  # CMake: PTX only
    set(tokens "compute_${CMAKE_MATCH_1}")
  elseif(value MATCHES "^([0-9]+[a-z]?)$")  # CMake: no suffix means both
    set(tokens "sm_${CMAKE_MATCH_1}" "compute_${CMAKE_MATCH_1}")
  endif()
  set(${out} "${tokens}" PARENT_SCOPE)
endfunction()

# Tokens of one -gencode / --generate-code value: "arch=compute_80,code=sm_80", "arch=compute_80,code=[sm_80,
# compute_80]" or code="...". The code= part is what ends up in the binary; arch= alone means PTX for it.
function(fwlab_cuda_gencode_tokens out value)
  set(tokens "")
  if(value MATCHES "code=(.*)$")
    string(REGEX MATCHALL "(sm|compute|lto)_[0-9]+[a-z]?" codes "${CMAKE_MATCH_1}")
    foreach(code IN LISTS codes)
      string(REGEX REPLACE "^lto_" "sm_" code "${code}")  # LTO IR is finalised for that GPU at link time
      list(APPEND tokens "${code}")
    endforeach()
  elseif(value MATCHES "arch=(compute_[0-9]+[a-z]?)")
    set(tokens "${CMAKE_MATCH_1}")
  endif()
  set(${out} "${tokens}" PARENT_SCOPE)
endfunction()

# Tokens of every architecture flag in an nvcc command line (CMAKE_CUDA_FLAGS): -gencode/--generate-code, -arch/
# --gpu-architecture and -code/--gpu-code, each as "-flag value", "-flag=value" or (-gencode only) "-gencode=value".
function(fwlab_cuda_archs_from_flags out flags)
  separate_arguments(args UNIX_COMMAND "${flags}")
  set(tokens "")
  set(pending "")  # the flag whose value is the next argument
  foreach(arg IN LISTS args)
    if(pending)
      set(flag "${pending}")
      set(value "${arg}")
      set(pending "")
    elseif(arg MATCHES "^(-gencode|--generate-code|-arch|--gpu-architecture|-code|--gpu-code)(=(.*))?$")
      set(flag "${CMAKE_MATCH_1}")
      set(value "${CMAKE_MATCH_3}")
      if(NOT CMAKE_MATCH_2)
        set(pending "${flag}")
        continue()
      endif()
    else()
      continue()
    endif()
    if(flag MATCHES "^(-gencode|--generate-code)$")
      fwlab_cuda_gencode_tokens(found "${value}")
    elseif(flag MATCHES "^(-code|--gpu-code)$")  # what is embedded, as written: sm_XX is device code only
      fwlab_cuda_gencode_tokens(found "code=${value}")
    else()  # -arch: one value or a comma-separated list
      string(REPLACE "," ";" values "${value}")
      set(found "")
      foreach(v IN LISTS values)
        fwlab_cuda_arch_tokens(t "${v}")
        list(APPEND found ${t})
      endforeach()
    endif()
    list(APPEND tokens ${found})
  endforeach()
  list(REMOVE_DUPLICATES tokens)
  set(${out} "${tokens}" PARENT_SCOPE)
endfunction()

# Tokens of a CMAKE_CUDA_ARCHITECTURES value; empty for OFF (or any false value) and for an empty one, which both
# mean CMake adds no architecture flag. all / all-major / native are expanded with the lists enable_language(CUDA)
# records (CMAKE_CUDA_ARCHITECTURES_ALL, ..._ALL_MAJOR, ..._NATIVE) when given.
function(fwlab_cuda_archs_from_architectures out value all all_major native)
  set(tokens "")
  if(value)
    foreach(entry IN LISTS value)
      fwlab_cuda_arch_tokens(t "${entry}")
      if(t STREQUAL "all" AND all)
        fwlab_cuda_archs_from_architectures(t "${all}" "" "" "")
      elseif(t STREQUAL "all-major" AND all_major)
        fwlab_cuda_archs_from_architectures(t "${all_major}" "" "" "")
      elseif(t STREQUAL "native" AND native)
        fwlab_cuda_archs_from_architectures(t "${native}" "" "" "")
      endif()
      list(APPEND tokens ${t})
    endforeach()
    list(REMOVE_DUPLICATES tokens)
  endif()
  set(${out} "${tokens}" PARENT_SCOPE)
endfunction()

# nvcc's default architecture, the one it builds for when given none: asked from nvcc itself (--dryrun prints the
# ptxas -arch it would use), else the documented default of its version (CUDA 13: sm_75; 11 and 12: sm_52).
function(fwlab_cuda_nvcc_default_arch out nvcc version)
  set(arch "")
  if(nvcc)
    execute_process(COMMAND "${nvcc}" --dryrun -x cu -c /dev/null -o /dev/null
                    OUTPUT_VARIABLE dry ERROR_VARIABLE dry RESULT_VARIABLE rc)
    if(rc EQUAL 0 AND dry MATCHES "-arch=sm_([0-9]+[a-z]?)")
      set(arch "${CMAKE_MATCH_1}")
    endif()
  endif()
  if(NOT arch AND version)
    if(version VERSION_GREATER_EQUAL 13)
      set(arch 75)
    elseif(version VERSION_GREATER_EQUAL 11)
      set(arch 52)
    else()
      set(arch 30)
    endif()
  endif()
  set(${out} "${arch}" PARENT_SCOPE)
endfunction()

# The architecture numbers of a token list, without duplicates and in ascending order ("sm_80;compute_90" -> 80;90).
function(fwlab_cuda_arch_numbers out tokens)
  set(numbers "")
  foreach(t IN LISTS tokens)
    if(t MATCHES "^(sm|compute)_([0-9]+[a-z]?)$")
      list(APPEND numbers "${CMAKE_MATCH_2}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES numbers)
  list(SORT numbers COMPARE NATURAL)
  set(${out} "${numbers}" PARENT_SCOPE)
endfunction()

# The refusal: an error message when tensor cores are asked for and no architecture in `tokens` is 80 or newer
# (PTX for compute_80+ counts: it is JIT-compiled with __CUDA_ARCH__ >= 800), else "". `source` says where the list
# came from. all / all-major include sm_80 with any nvcc that knows it; native is only known at build time.
function(fwlab_cuda_tensor_core_error out tokens source)
  set(message "")
  set(ok OFF)
  foreach(t IN LISTS tokens)
    if(t MATCHES "^(all|all-major|native)$")
      set(ok ON)
    elseif(t MATCHES "^(sm|compute)_([0-9]+)")
      if(CMAKE_MATCH_2 GREATER_EQUAL 80)
        set(ok ON)
      endif()
    endif()
  endforeach()
  if(NOT ok)
    string(REPLACE ";" " " shown "${tokens}")
    string(CONCAT message
      "fwlab: the CUDA kernels would be built for ${shown} (${source}), and none of these is sm_80 or newer: "
      "kernels/decay/cuda/chunks.h takes its tensor-core (WMMA bf16) path only under __CUDA_ARCH__ >= 800, so they "
      "would silently run the scalar loops. Ask for an Ampere-or-newer architecture: with a CUDA libtorch (whose "
      "cuda.cmake sets CMAKE_CUDA_ARCHITECTURES OFF and passes -gencode flags) TORCH_CUDA_ARCH_LIST=\"8.0;9.0\" "
      "(environment, or -DTORCH_CUDA_ARCH_LIST=\"8.0;9.0\"); otherwise -DCMAKE_CUDA_ARCHITECTURES=\"80;90\". "
      "Or accept the scalar loops with -DFWLAB_CUDA_TENSOR_CORES=OFF.")
  endif()
  set(${out} "${message}" PARENT_SCOPE)
endfunction()

# The architecture tokens this configure compiles for, and where they came from (for the messages):
# CMAKE_CUDA_ARCHITECTURES when not OFF/empty, plus any architecture flag in CMAKE_CUDA_FLAGS; nvcc's default when
# neither gives one.
function(fwlab_cuda_effective_archs out_tokens out_source)
  fwlab_cuda_archs_from_architectures(from_var "${CMAKE_CUDA_ARCHITECTURES}" "${CMAKE_CUDA_ARCHITECTURES_ALL}"
                                      "${CMAKE_CUDA_ARCHITECTURES_ALL_MAJOR}" "${CMAKE_CUDA_ARCHITECTURES_NATIVE}")
  fwlab_cuda_archs_from_flags(from_flags "${CMAKE_CUDA_FLAGS}")
  set(sources "")
  if(from_var)
    string(REPLACE ";" " " value "${CMAKE_CUDA_ARCHITECTURES}")
    list(APPEND sources "CMAKE_CUDA_ARCHITECTURES=${value}")
  endif()
  if(from_flags)
    list(APPEND sources "architecture flags in CMAKE_CUDA_FLAGS")
  endif()
  set(tokens ${from_var} ${from_flags})
  if(tokens)
    list(REMOVE_DUPLICATES tokens)
    string(REPLACE ";" " and " source "${sources}")
  else()
    fwlab_cuda_nvcc_default_arch(default "${CMAKE_CUDA_COMPILER}" "${CMAKE_CUDA_COMPILER_VERSION}")
    set(tokens "sm_${default}" "compute_${default}")
    string(CONCAT source "no architecture given (CMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES}, "
                         "no -gencode/-arch in CMAKE_CUDA_FLAGS): nvcc ${CMAKE_CUDA_COMPILER_VERSION}'s default "
                         "sm_${default} applies")
  endif()
  set(${out_tokens} "${tokens}" PARENT_SCOPE)
  set(${out_source} "${source}" PARENT_SCOPE)
endfunction()

# One entry per architecture, as the GPUs the binary has code for: sm_XX, or compute_XX where only PTX is
# embedded; all / all-major / native where they could not be expanded.
function(fwlab_cuda_shown_archs out tokens)
  fwlab_cuda_arch_numbers(numbers "${tokens}")
  set(shown "")
  foreach(n IN LISTS numbers)
    if("sm_${n}" IN_LIST tokens)
      list(APPEND shown "sm_${n}")
    else()
      list(APPEND shown "compute_${n}")
    endif()
  endforeach()
  list(FILTER tokens INCLUDE REGEX "^(all|all-major|native)$")
  list(APPEND shown ${tokens})
  set(${out} "${shown}" PARENT_SCOPE)
endfunction()

# Settles the architectures after find_package(Torch), which may have changed both inputs: prints them
# ("fwlab: CUDA kernels built for sm_80 sm_90"), stops with FATAL_ERROR under FWLAB_CUDA_TENSOR_CORES when none is
# 80 or newer, and sets, in the caller's scope and the cache:
#   FWLAB_CUDA_ARCHS_STRING  the architecture numbers as a CMake list ("80;90"), for CMake code and scripts;
#   FWLAB_CUDA_ARCHS_CSV     the same comma-separated ("80,90"), for compile definitions, where a ';' would split
#                            FWLAB_CUDA_ARCHS="80;90" into two definitions.
function(fwlab_cuda_resolve_archs)
  fwlab_cuda_effective_archs(tokens source)
  fwlab_cuda_shown_archs(shown "${tokens}")
  string(REPLACE ";" " " printed "${shown}")
  if(source MATCHES "^no architecture given")
    message(STATUS "fwlab: ${source}")
  endif()
  message(STATUS "fwlab: CUDA kernels built for ${printed}")
  if(FWLAB_CUDA_TENSOR_CORES)
    fwlab_cuda_tensor_core_error(error "${shown}" "${source}")
    if(error)
      message(FATAL_ERROR "${error}")
    endif()
  endif()
  string(REGEX REPLACE "(sm|compute)_" "" archs "${shown}")
  string(REPLACE ";" "," csv "${archs}")
  set(FWLAB_CUDA_ARCHS_STRING "${archs}" PARENT_SCOPE)
  set(FWLAB_CUDA_ARCHS_CSV "${csv}" PARENT_SCOPE)
  set(FWLAB_CUDA_ARCHS_STRING "${archs}" CACHE INTERNAL "the CUDA kernels' architectures (a list: 80;90)")
  set(FWLAB_CUDA_ARCHS_CSV "${csv}" CACHE INTERNAL "the CUDA kernels' architectures, comma-separated")
endfunction()

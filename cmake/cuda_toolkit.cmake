# One CUDA toolkit for libtorch and the kernels. The kernels link the local toolkit's CUDA::cudart next to the one
# a CUDA libtorch was built against; two runtimes of different versions in one process (and kernels compiled by
# another nvcc than torch's) fail at run time, far from the cause. So: find the CUDA version of the libtorch that
# find_package(Torch) will load, prefer the nvcc of that version, and refuse another one at configure time.
# Functions of their arguments, tested under cmake -P by tests/cmake/cuda_toolkit_test.cmake.

# CUDA version (major.minor) from the text of a pip install's torch/version.py ("cuda = '12.4'", newer ones
# "cuda: Optional[str] = '12.4'"); "" for a CPU build (cuda = None) or text without the line.
function(fwlab_torch_cuda_from_version_py out text)
  set(version "")
  if(text MATCHES "(^|\n)cuda[ \t]*(:[^=\n]*)?=[ \t]*['\"]([0-9]+)\\.([0-9]+)")
    set(version "${CMAKE_MATCH_3}.${CMAKE_MATCH_4}")
  endif()
  set(${out} "${version}" PARENT_SCOPE)
endfunction()

# CUDA version from a libtorch zip's build-version ("2.4.0+cu124" -> 12.4, "2.7.1+cu118" -> 11.8,
# "2.9.0+cu130" -> 13.0); "" for +cpu, +rocm... The tag is cu, the major version's two digits, the minor's one.
function(fwlab_torch_cuda_from_build_version out text)
  set(version "")
  if(text MATCHES "\\+cu([0-9][0-9])([0-9]+)")
    math(EXPR major "${CMAKE_MATCH_1}")  # "09" -> 9 (never seen, but harmless)
    set(version "${major}.${CMAKE_MATCH_2}")
  endif()
  set(${out} "${version}" PARENT_SCOPE)
endfunction()

# The directories that may hold the Torch package find_package(Torch) will load: Torch_DIR, then each
# CMAKE_PREFIX_PATH entry (variable, then environment) as the package dir itself, <entry>/Torch or
# <entry>/share/cmake/Torch. Only where a TorchConfig.cmake is.
function(fwlab_torch_config_dirs out)
  set(candidates "")
  foreach(dir IN ITEMS "${Torch_DIR}" "$ENV{Torch_DIR}")
    if(dir)
      list(APPEND candidates "${dir}")
    endif()
  endforeach()
  string(REPLACE ":" ";" env_prefixes "$ENV{CMAKE_PREFIX_PATH}")
  foreach(prefix IN LISTS CMAKE_PREFIX_PATH env_prefixes)
    if(prefix)
      list(APPEND candidates "${prefix}" "${prefix}/Torch" "${prefix}/share/cmake/Torch")
    endif()
  endforeach()
  set(dirs "")
  foreach(dir IN LISTS candidates)
    if(EXISTS "${dir}/TorchConfig.cmake")
      list(APPEND dirs "${dir}")
    endif()
  endforeach()
  set(${out} "${dirs}" PARENT_SCOPE)
endfunction()

# torch's CUDA version from the first Torch package dir that has version.py (pip: .../site-packages/torch/version.py,
# three levels above share/cmake/Torch) or build-version (libtorch zip: libtorch/build-version) a few levels up.
# Sets <out> to major.minor, or "" (a CPU libtorch, Debian's, or none found); <out>_FROM to the file read.
function(fwlab_torch_cuda_version out)
  fwlab_torch_config_dirs(dirs)
  foreach(dir IN LISTS dirs)
    get_filename_component(dir "${dir}" ABSOLUTE)
    foreach(level RANGE 5)
      foreach(name IN ITEMS version.py build-version)
        if(EXISTS "${dir}/${name}" AND NOT IS_DIRECTORY "${dir}/${name}")
          file(READ "${dir}/${name}" text)
          if(name STREQUAL "version.py")
            fwlab_torch_cuda_from_version_py(version "${text}")
          else()
            fwlab_torch_cuda_from_build_version(version "${text}")
          endif()
          set(${out} "${version}" PARENT_SCOPE)
          set(${out}_FROM "${dir}/${name}" PARENT_SCOPE)
          return()
        endif()
      endforeach()
      get_filename_component(dir "${dir}" DIRECTORY)
    endforeach()
  endforeach()
  set(${out} "" PARENT_SCOPE)
  set(${out}_FROM "" PARENT_SCOPE)
endfunction()

# The nvcc of CUDA <version> in its default place (<root>/cuda-X.Y/bin/nvcc, root /usr/local), or "".
function(fwlab_nvcc_for_cuda_version out version root)
  set(nvcc "")
  if(version AND EXISTS "${root}/cuda-${version}/bin/nvcc")
    set(nvcc "${root}/cuda-${version}/bin/nvcc")
  endif()
  set(${out} "${nvcc}" PARENT_SCOPE)
endfunction()

# An error message when <found_what> (a compiler or toolkit) of CUDA <found> is not of <expected_what>'s CUDA
# <expected> (compared as major.minor), else "". Names both versions and how to point at the right toolkit.
function(fwlab_cuda_version_mismatch out expected expected_what found found_what)
  set(message "")
  if(expected AND found)
    string(REGEX MATCH "^[0-9]+\\.[0-9]+" expected_mm "${expected}")
    string(REGEX MATCH "^[0-9]+\\.[0-9]+" found_mm "${found}")
    if(NOT found_mm VERSION_EQUAL expected_mm)
      string(CONCAT message
        "fwlab: ${expected_what} is CUDA ${expected_mm}, but ${found_what} is CUDA ${found}. One build must not mix "
        "two CUDA versions: the kernels link CUDA::cudart next to libtorch's own CUDA runtime. Use the CUDA "
        "${expected_mm} toolkit: CUDACXX=/usr/local/cuda-${expected_mm}/bin/nvcc or "
        "-DCMAKE_CUDA_COMPILER=/usr/local/cuda-${expected_mm}/bin/nvcc (and -DCUDAToolkit_ROOT=/usr/local/"
        "cuda-${expected_mm} where one is set), in a fresh build directory.")
    endif()
  endif()
  set(${out} "${message}" PARENT_SCOPE)
endfunction()

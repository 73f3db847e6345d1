# ctest's abi_link_check:
#   cmake -DSOURCE_DIR=... -DBUILD_DIR=... [-DCXX=...] [-DGENERATOR=...] [-DJOBS=2] -P abi_link_check.cmake
#
# Configures the torch-free tree (FWLAB_TORCH=OFF, FWLAB_ABI_CHECK=ON) in BUILD_DIR with -D_GLIBCXX_USE_CXX11_ABI=0
# forced, the ABI of PyTorch wheels before 2.7, which the top CMakeLists.txt applies to every target; builds
# tests/abi's two executables, one linking fwlab_contract, fwlab_data (the worker's torch-free libraries),
# fwlab_harness and fwlab_analysis whole, one a Catch2 test on the test binaries' main (tests/catch_main.cpp); and
# runs them. Fails on a configure, compile or link error (an undefined fmt::vformat where a library takes compiled
# C++11-ABI code across a std::string) or a failed call. BUILD_DIR is kept between runs, so a rerun rebuilds only
# what changed.
cmake_minimum_required(VERSION 3.24)
if(NOT JOBS)
  set(JOBS 2)
endif()
foreach(var SOURCE_DIR BUILD_DIR)
  if(NOT ${var})
    message(FATAL_ERROR "abi_link_check: -D${var}=... is required")
  endif()
endforeach()
# No optimisation (Debug): what is checked is which symbols link, and -O0 compiles the torch-free tree in about
# half the time of -O3.
set(configure_args -S "${SOURCE_DIR}" -B "${BUILD_DIR}" -DFWLAB_TORCH=OFF -DFWLAB_ABI_CHECK=ON
                   -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS=-D_GLIBCXX_USE_CXX11_ABI=0")
# The compiler and generator of the calling build, on the first configure only (changing either later would make
# CMake drop the cache and rebuild everything).
if(NOT EXISTS "${BUILD_DIR}/CMakeCache.txt")
  if(CXX)
    list(APPEND configure_args "-DCMAKE_CXX_COMPILER=${CXX}")
  endif()
  if(GENERATOR)
    list(APPEND configure_args -G "${GENERATOR}")
  endif()
endif()

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "abi_link_check: ${what} failed (${rc})")
  endif()
endfunction()

run(configure "${CMAKE_COMMAND}" ${configure_args})
run(build "${CMAKE_COMMAND}" --build "${BUILD_DIR}" --target fwlab_abi_link_check fwlab_abi_catch_check
    --parallel ${JOBS})
run(run "${BUILD_DIR}/tests/abi/fwlab_abi_link_check")
run("the Catch2 test" "${BUILD_DIR}/tests/abi/fwlab_abi_catch_check")

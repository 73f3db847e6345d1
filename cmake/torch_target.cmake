# Every translation unit that includes <torch/torch.h> costs ~17 s and 1.3 GB to compile. They all share one
# precompiled header (built once by fwlab_pch) and one set of flags, so the header is parsed once per build.
#
# Hot loops (raw-pointer kernels) need OpenMP for at::parallel_for and relaxed FP associativity to vectorise
# reductions; the flags are global to the torch targets because a reused PCH requires identical flags (which is
# also why no torch target sets POSITION_INDEPENDENT_CODE: executables would get -fPIE and lose the PCH).
set(FWLAB_TORCH_FLAGS -fopenmp -fno-math-errno -fno-trapping-math)
#
# fmt: fwlab_fmt (cmake/fmt_library.cmake) on every torch target and on the PCH, which must see the macros its
# users see.

add_library(fwlab_pch OBJECT ${PROJECT_SOURCE_DIR}/cmake/pch_anchor.cpp)
target_link_libraries(fwlab_pch PUBLIC "${TORCH_LIBRARIES}" OpenMP::OpenMP_CXX fwlab_fmt)
target_compile_options(fwlab_pch PUBLIC ${FWLAB_TORCH_FLAGS})
target_precompile_headers(fwlab_pch PUBLIC <torch/torch.h>)

function(fwlab_torch_target target)
  target_link_libraries(${target} PUBLIC "${TORCH_LIBRARIES}" OpenMP::OpenMP_CXX fwlab_fmt)
  target_compile_options(${target} PRIVATE ${FWLAB_TORCH_FLAGS})
  target_precompile_headers(${target} REUSE_FROM fwlab_pch)
endfunction()

# Sources that take definitions of their own (the CUDA bindings: FWLAB_HAVE_CUDA, FWLAB_TORCH_CUDA, ...) which the
# shared header was built without. GCC still uses it: it rejects a precompiled header only for a macro that the
# header's own text uses, and torch's headers use none of fwlab's (measured: decay/chunk_cuda.cpp in 25 s instead of
# 46). Other compilers compile such files without it, as before.
function(fwlab_definitions_on_sources definitions)
  set_source_files_properties(${ARGN} PROPERTIES COMPILE_DEFINITIONS "${definitions}")
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    set_source_files_properties(${ARGN} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
  endif()
endfunction()

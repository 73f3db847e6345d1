# fwlab_fmt: fmt's compiled part built once here (cmake/fmt_library.cpp), linked by every target that formats.
# Not Debian's libfmt.so: it is compiled with the C++11 ABI, which a PyTorch wheel before 2.7 does not use, and its
# fmt::vformat returns a std::string (the ABI note in the top CMakeLists.txt). Not FMT_HEADER_ONLY either, which
# was the way round that until 2026-11-30: it compiles fmt's implementation again in every translation unit that
# formats, ~8 s each here, ~3 minutes of a clean two-core build. Built after the ABI flag is set, so the library
# takes the tree's flag like everything else; position-independent, for the shared libraries that link it.
get_target_property(FWLAB_FMT_INCLUDES fmt::fmt-header-only INTERFACE_INCLUDE_DIRECTORIES)
add_library(fwlab_fmt STATIC ${PROJECT_SOURCE_DIR}/cmake/fmt_library.cpp)
target_include_directories(fwlab_fmt SYSTEM PUBLIC ${FWLAB_FMT_INCLUDES})
set_target_properties(fwlab_fmt PROPERTIES POSITION_INDEPENDENT_CODE ON UNITY_BUILD OFF)

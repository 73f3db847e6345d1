// Removing a directory tree in any fwlab process, libtorch's included. Not std::filesystem::remove_all: PyTorch's
// libtorch.so (2.11, CUDA 13 wheel) carries and exports its own copy of it, calls from a binary linked against
// that libtorch bind to the copy, and the copy's remove_all(path, error_code&) called through a null pointer on
// an H100 machine (results/gpu/README.md). POSIX's nftw comes from the C library alone.
#pragma once

#include <string>

namespace fwlab {

// Removes `path` and, for a directory, everything under it; symbolic links are removed, never followed. True when
// nothing is left at `path` (a path that did not exist included); false if an entry could not be removed.
bool remove_tree(const std::string& path);

}  // namespace fwlab

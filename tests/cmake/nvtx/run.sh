#!/usr/bin/env bash
# ctest's cmake_nvtx: configures and builds tests/cmake/nvtx (cmake/nvtx_shim.cmake against the local CUDA
# toolkit) in BUILD_DIR. Exit 77 (skipped) where CMake finds no CUDA toolkit.
#   run.sh SOURCE_DIR BUILD_DIR [CMAKE]
set -euo pipefail
src=$1 build=$2 cmake=${3:-cmake}
rm -rf "$build"
# The toolkit's default place, often not on PATH (as cmake/cuda.cmake looks there too).
if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc CUDAToolkit_ROOT=/usr/local/cuda
fi
"$cmake" -S "$src/tests/cmake/nvtx" -B "$build" -DFWLAB_SOURCE_DIR="$src"
if [ "$(cat "$build/result")" = skip ]; then
  echo "nvtx: no CUDA toolkit found; skipped"
  exit 77
fi
"$cmake" --build "$build"
echo "nvtx: $(cat "$build/result")"

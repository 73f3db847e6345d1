#!/usr/bin/env bash
# ctest's cmake_cuda_torch: configures (only) the whole project against a stand-in CUDA libtorch laid out as a pip
# install (site-packages/torch/version.py + share/cmake/Torch/TorchConfig.cmake from this directory), with the
# local nvcc, in BUILD_DIR/<case>. Checks the order of cmake/cuda.cmake around find_package(Torch):
#   archs80   TORCH_CUDA_ARCH_LIST=8.0;9.0: configures; "fwlab: CUDA kernels built for sm_80 sm_90" (the
#             architectures from torch's -gencode flags, read after find_package(Torch)); the NVTX shim lets
#             torch::nvtoolsext -> CUDA::nvToolsExt generate;
#   archs75   TORCH_CUDA_ARCH_LIST=7.5: refused, no sm_80+ architecture;
#   noarch    no architecture at all (no TORCH_CUDA_ARCH_LIST here): refused, nvcc's default (sm_75 for CUDA 13);
#   mismatch  torch built with another CUDA (10.2) than the local nvcc's: refused, both versions named.
# Exit 77 (skipped) without nvcc.
#   run.sh SOURCE_DIR BUILD_DIR [CMAKE]
set -uo pipefail
src=$1 build=$2 cmake=${3:-cmake}
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -x "$nvcc" ]; then
  echo "cuda_torch: no nvcc; skipped"
  exit 77
fi
local_cuda=$("$nvcc" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')
other_cuda=10.2  # a CUDA no machine here has installed (its nvcc would be preferred and match)
rm -rf "$build"
failed=0

# configure CASE TORCH_CUDA TORCH_CUDA_ARCH_LIST: the output in $build/CASE.log, the exit status returned.
configure() {
  local torch=$build/$1/site-packages/torch
  mkdir -p "$torch/share/cmake/Torch"
  cp "$src/tests/cmake/cuda_torch/TorchConfig.cmake" "$torch/share/cmake/Torch/"
  printf "__version__ = '2.6.0+cu%s'\ndebug = False\ncuda: Optional[str] = '%s'\n" "${2/./}" "$2" >"$torch/version.py"
  TORCH_CUDA_ARCH_LIST=$3 "$cmake" -S "$src" -B "$build/$1/build" -DCMAKE_PREFIX_PATH="$torch/share/cmake" \
    -DFWLAB_CUDA=ON >"$build/$1.log" 2>&1
}
# expect CASE WANT STATUS REGEX...: WANT "ok" (configures) or "refused"; each REGEX must be in the output.
expect() {
  local case=$1 want=$2 status=$3 ok=1
  shift 3
  if [ "$want" = ok ] && [ "$status" != 0 ]; then ok=0; fi
  if [ "$want" = refused ] && [ "$status" = 0 ]; then ok=0; fi
  for re in "$@"; do
    if ! tr '\n' ' ' <"$build/$case.log" | sed 's/  */ /g' | grep -qE -- "$re"; then
      echo "cuda_torch $case: no '$re'"
      ok=0
    fi
  done
  if [ $ok = 1 ]; then
    echo "cuda_torch $case: ok"
  else
    echo "cuda_torch $case: FAILED (wanted: $want; configure exit $status)"
    tail -30 "$build/$case.log" | sed 's/^/  | /'
    failed=1
  fi
}

configure archs80 "$local_cuda" "8.0;9.0"
expect archs80 ok $? "fwlab: libtorch built with CUDA $local_cuda" "fwlab: CUDA kernels built for sm_80 sm_90" \
  "Generating done"
configure archs75 "$local_cuda" "7.5"
expect archs75 refused $? "built for sm_75 \(architecture flags in CMAKE_CUDA_FLAGS\)" "none of these is sm_80" \
  "TORCH_CUDA_ARCH_LIST=\"8.0;9.0\""
configure noarch "$local_cuda" ""
expect noarch refused $? "no architecture given .*nvcc [0-9.]*'s default sm_[0-9]+ applies" "none of these is sm_80"
configure mismatch "$other_cuda" "8.0;9.0"
expect mismatch refused $? "is CUDA $other_cuda, but the CUDA compiler [^ ]*nvcc is CUDA $local_cuda" \
  "CUDACXX=/usr/local/cuda-$other_cuda/bin/nvcc"
exit $failed

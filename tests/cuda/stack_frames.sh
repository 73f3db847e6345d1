#!/usr/bin/env bash
# The CUDA kernels' per-thread stack frames, as ptxas reports them: a frame is local memory that the driver reserves
# for every thread that can be resident on the GPU (a 9 KB frame is ~2 GB on an H100), outside PyTorch's allocator.
# Compiles each kernel file's device code with the build's nvcc for the architectures given and fails if any
# kernel's frame is over LIMIT bytes.  Usage: stack_frames.sh NVCC SOURCE_DIR LIMIT ARCH...   (ctest: cuda_stack_frames)
set -euo pipefail
nvcc=$1 src=$2 limit=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
# Device code only (-fatbin: no host compilation), every architecture in one nvcc run per file.
gencode=()
for arch in "$@"; do gencode+=("--generate-code=arch=compute_$arch,code=sm_$arch"); done
for file in "$src"/kernels/cuda/*.cu "$src"/kernels/*/cuda/*.cu; do
  "$nvcc" -I"$src" -O3 -std=c++17 -fatbin "${gencode[@]}" -Xptxas -v "$file" -o "$work/k.fatbin" >"$work/log" 2>&1 ||
    { cat "$work/log"; exit 1; }
  # Lines come in pairs: "Compiling entry function 'NAME' for 'sm_XX'" then "N bytes stack frame, ...".
  while read -r arch name bytes; do
    verdict=ok
    if [ "$bytes" -gt "$limit" ]; then verdict=FAIL status=1; fi
    printf '%-4s %-5s %-18s %6s bytes  %s\n' "$verdict" "$arch" "$(basename "$file")" "$bytes" "$(echo "$name" | c++filt | cut -c1-90)"
  done < <(awk -F"'" '/Compiling entry function/ { name = $2; arch = $4 }
                      /bytes stack frame/ { split($0, w, " "); print arch, name, w[1] }' "$work/log")
done
[ "$status" = 0 ] && echo "every kernel's stack frame is at most $limit bytes" || echo "FAILED: a kernel's stack frame is over $limit bytes"
exit $status

#!/usr/bin/env bash
# The CUDA kernels' per-thread stack frames, as ptxas reports them: a frame is local memory that the driver reserves
# for every thread that can be resident on the GPU (a 9 KB frame is ~2 GB on an H100), outside PyTorch's allocator.
# Compiles each kernel file with the build's nvcc for each architecture given and fails if any kernel's frame is
# over LIMIT bytes.  Usage: stack_frames.sh NVCC SOURCE_DIR LIMIT ARCH...   (ctest: cuda_stack_frames)
set -euo pipefail
nvcc=$1 src=$2 limit=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for arch in "$@"; do
  for file in "$src"/kernels/cuda/*.cu "$src"/kernels/*/cuda/*.cu; do
    "$nvcc" -I"$src" -O3 -std=c++17 --generate-code="arch=compute_$arch,code=sm_$arch" -Xptxas -v -c "$file" -o "$work/k.o" \
      >"$work/log" 2>&1 || { cat "$work/log"; exit 1; }
    # Lines come in pairs: "Compiling entry function 'NAME' for 'sm_XX'" then "N bytes stack frame, ...".
    while read -r name bytes; do
      verdict=ok
      if [ "$bytes" -gt "$limit" ]; then verdict=FAIL status=1; fi
      printf '%-4s sm_%s %-18s %6s bytes  %s\n' "$verdict" "$arch" "$(basename "$file")" "$bytes" "$(echo "$name" | c++filt | cut -c1-90)"
    done < <(awk -F"'" '/Compiling entry function/ { name = $2 }
                        /bytes stack frame/ { split($0, w, " "); print name, w[1] }' "$work/log")
  done
done
[ "$status" = 0 ] && echo "every kernel's stack frame is at most $limit bytes" || echo "FAILED: a kernel's stack frame is over $limit bytes"
exit $status

#!/usr/bin/env bash
# The GPU check of a bare GPU machine (issue 45): builds fwlab with CUDA for the GPU it finds and writes, under one
# folder, what a user would want to know before trusting it there.
#
#   scripts/gpu_check.sh OUT [--deps BUNDLE] [--budget SECONDS] [--rehearse] [--no-bench] [--ncu REGEX[,REGEX...]]
#
#   --no-bench  the checks without the benchmark (a re-run after a fix)
#   --ncu REGEX after the benchmark, Nsight Compute's basic sections for the first kernels whose demangled names
#              (namespace, template and parameter types included) match REGEX, one op-level run per comma-separated
#              REGEX (ncu.txt; 'ChunkProblem,delta::' profiles the decay family's chunked kernels, then the delta
#              family's): the profile to read before optimising them. The plain function names ("outputs_kernel")
#              do not say which family a kernel is, so ncu matches the demangled ones.
#   OUT        the output folder (at most 8 files: the device tool brings back that many)
#   --deps     scripts/bundle_deps.sh's tarball or extracted folder, for a machine without Debian's libraries
#   --budget   seconds the whole check may take (default 540): each step's time limit is cut to what is left, so a
#              slow build still leaves the outputs of what ran
#   --rehearse on a machine without a GPU: Debian's CPU libtorch, the benchmark with --smoke; everything that does
#              not need a GPU runs as it would there
#
# Writes: device.txt (nvidia-smi's device line, driver, toolkit, libtorch, compilers), build.log (configure and
# build), cuda.txt (the CUDA kernels against their host rows: ctest `cuda`), doctor.txt (`fwlab doctor`: every
# kernel against libtorch's form, fp32 / bf16 / fp16), gpu.txt (ctest `gpu`: bindings, model; then ctest
# `gpu_worker`: the worker on CUDA, every step of its curves), bench.txt (fwlab-bench-gpu: ops, then the model
# level), ncu.txt (with --ncu), summary.txt (each step's exit status and seconds).
# The order puts the cheapest decisive checks first: the kernels' own test needs only nvcc's build.
set -uo pipefail
root=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
out=${1:?usage: scripts/gpu_check.sh OUT [--deps BUNDLE] [--budget SECONDS] [--rehearse]}; shift
deps="" budget=540 rehearse=0 bench=1 ncu_kernels=""
while [ $# -gt 0 ]; do
  case $1 in
    --deps) deps=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --rehearse) rehearse=1; shift ;;
    --no-bench) bench=0; shift ;;
    --ncu) ncu_kernels=$2; shift 2 ;;
    *) echo "gpu_check: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"; out=$(cd "$out" && pwd)
start=$SECONDS
build=${FWLAB_GPU_BUILD_DIR:-$root/build-gpu}
summary=$out/summary.txt; : >"$summary"

left() { echo $((budget - (SECONDS - start))); }
# step NAME CAP LOG COMMAND...: runs COMMAND with stdout/stderr appended to LOG, line-buffered, under the smaller of
# CAP and the budget left (less 10 s for the rest); records status and seconds.
step() {
  local name=$1 cap=$2 log=$3; shift 3
  local limit; limit=$(( $(left) - 10 )); [ "$limit" -gt "$cap" ] && limit=$cap
  if [ "$limit" -le 5 ]; then echo "$name: not run (budget spent)" | tee -a "$summary"; return 124; fi
  local t0=$SECONDS rc=0
  echo "== $name (limit ${limit}s): $*" >>"$log"
  timeout -k 5 "$limit" stdbuf -oL -eL "$@" >>"$log" 2>&1 || rc=$?
  echo "$name: exit $rc, $((SECONDS - t0)) s" | tee -a "$summary"
  return $rc
}

describe_machine() {
  {
    echo "date: $(date -u +%FT%TZ)"
    if command -v nvidia-smi >/dev/null; then
      nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,clocks.max.sm --format=csv
      nvidia-smi -L
    else
      echo "nvidia-smi: none (no GPU driver here)"
    fi
    echo "cpus: $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
    echo "os: $(. /etc/os-release; echo "$PRETTY_NAME"), glibc $(getconf GNU_LIBC_VERSION)"
    echo "cmake: $(cmake --version | head -1); ninja: $(ninja --version 2>/dev/null); c++: $(c++ --version | head -1)"
    echo "nvcc: $( (${CUDACXX:-nvcc} --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version 2>/dev/null) | tail -2 | tr '\n' ' ')"
    echo "pkg-config: $(command -v pkg-config || echo none)"
    [ "$rehearse" = 1 ] || python3 -c 'import torch, os; print("python torch:", torch.__version__, "cuda", torch.version.cuda, "cxx11 abi", torch.compiled_with_cxx11_abi(), "include/:", " ".join(sorted(os.listdir(os.path.join(os.path.dirname(torch.__file__), "include")))))'
  } >"$out/device.txt" 2>&1
}

configure() {
  local args=(-S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON)
  if [ -n "$deps" ]; then
    local dir=$deps
    if [ -f "$deps" ]; then dir=/tmp/fwlab-gpu-deps; mkdir -p "$dir"; tar xzf "$deps" -C "$dir"; dir=$dir/fwlab-deps; fi
    args+=(-DCMAKE_PROJECT_INCLUDE="$(cd "$dir" && pwd)/fwlab-deps.cmake")
  fi
  if [ "$rehearse" = 0 ]; then
    args+=(-DCMAKE_PREFIX_PATH="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')")
    # The architecture of the GPU present, e.g. 9.0 for an H100 (README: configure refuses below sm_80).
    export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1)}
  fi
  step configure 180 "$out/build.log" cmake "${args[@]}"
}

# A crashed test's stack, where cuda-gdb is (it debugs host code too): the frames name fwlab's functions.
backtrace() {
  local log=$1 gdb; gdb=$(command -v cuda-gdb || command -v gdb || echo /usr/local/cuda/bin/cuda-gdb)
  [ -x "$gdb" ] || return 0
  step backtrace 120 "$log" "$gdb" -batch -ex run -ex 'x/8a $sp' -ex bt -ex 'info sharedlibrary' --args "$2"
}

main() {
  describe_machine
  configure || { echo "gpu_check: configure failed (build.log)"; return 1; }
  # The kernels' own test first: it needs nvcc's objects only, minutes before the libtorch parts are built.
  if step build-cuda-test 240 "$out/build.log" cmake --build "$build" --target fwlab_cuda_tests -- -k 0; then
    step ctest-cuda 60 "$out/cuda.txt" ctest --test-dir "$build" -R '^cuda$' --output-on-failure
  fi
  step build 420 "$out/build.log" cmake --build "$build" --target fwlab fwlab-worker fwlab_gpu_tests fwlab_gpu_worker_tests fwlab-bench-gpu -- -k 0 ||
    { echo "gpu_check: build failed (build.log)"; return 1; }
  step doctor 120 "$out/doctor.txt" "$build/cli/fwlab" doctor
  step ctest-gpu 180 "$out/gpu.txt" ctest --test-dir "$build" -R '^gpu$' --output-on-failure -V || backtrace "$out/gpu.txt" "$build/tests/fwlab_gpu_tests"
  step ctest-gpu-worker 120 "$out/gpu.txt" ctest --test-dir "$build" -R '^gpu_worker$' --output-on-failure -V
  [ "$bench" = 1 ] || return 0
  local smoke=(); [ "$rehearse" = 1 ] && smoke=(--smoke)
  step bench-ops 150 "$out/bench.txt" "$build/bench/fwlab-bench-gpu" --only ops "${smoke[@]}"
  step bench-model 150 "$out/bench.txt" "$build/bench/fwlab-bench-gpu" --only model "${smoke[@]}"
  [ -n "$ncu_kernels" ] || return 0
  local ncu; ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  # A few launches of each matching kernel after the warm-up (the first rows' first launches), one repeat; one run per
  # regex, so that the delta family's kernels are not crowded out by the decay family's, whose rows come first.
  local regex
  for regex in ${ncu_kernels//,/ }; do
    step ncu 150 "$out/ncu.txt" "$ncu" --section SpeedOfLight --section LaunchStats --section Occupancy \
      --kernel-name-base demangled -k "regex:$regex" --launch-skip 20 --launch-count 8 "$build/bench/fwlab-bench-gpu" \
      --only ops --repeats 1 "${smoke[@]}"
  done
}

main
echo "total: $((SECONDS - start)) s" | tee -a "$summary"
# The build log's end is what matters when it fails; keep the file under the device tool's 16 MiB per file.
tail -c 4000000 "$out/build.log" >"$out/build.log.tail" && mv "$out/build.log.tail" "$out/build.log"

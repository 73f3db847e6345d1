#!/usr/bin/env bash
# Fuzzes fwlab's parsers with libFuzzer under AddressSanitizer and UBSan: the experiment-file loader, the
# safetensors reader, event-record ingestion, GPT-2 BPE, job.json, and the files users download: a Hugging Face
# config.json with its shard index, tokenizer.json, evaluation task JSONL and parallel corpora (tests/fuzz/). The same torch-free
# tree is the ABI check: it is compiled with -D_GLIBCXX_USE_CXX11_ABI=0, the flag PyTorch wheels before 2.7 give
# every target, and tests/abi's two programs link its libraries whole and run them (ctest's abi_link_check).
#
#   scripts/fuzz.sh                  the long run: 600 s per target
#   scripts/fuzz.sh SECONDS [T...]   SECONDS per target, only targets T (experiment safetensors ingest bpe job_spec
#                                    hf_config hf_tokenizer task_file parallel)
#   scripts/fuzz.sh --short          10 s per target (ctest's fuzz_short, in CI)
#   scripts/fuzz.sh --build-only     configure and build build-fuzz/ (scripts/setup.sh does)
#   scripts/fuzz.sh --abi-check      build and run tests/abi's programs (ctest's abi_link_check)
#
# Seeds: tests/fuzz/corpus/T (read only). Inputs that crash go to build-fuzz/crashes/T/; once fixed, copy
# them to tests/fuzz/regressions/T/, where the ordinary test binary replays them. Exit 1 if any target crashed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${FWLAB_FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=600 build_only=0 abi_check=0
case "${1:-}" in
  --short) seconds=10; shift ;;
  --build-only) build_only=1; shift ;;
  --abi-check) abi_check=1; shift ;;
  ''|*[!0-9]*) ;;
  *) seconds=$1; shift ;;
esac
all_targets=(experiment safetensors ingest bpe job_spec hf_config hf_tokenizer task_file parallel)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")

if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found (scripts/setup.sh installs clang and libclang-rt); skipped"
  exit 77
fi
# A tree configured before it was also the ABI check is configured again.
if [ ! -f "$build/build.ninja" ] || ! grep -q '^FWLAB_ABI_CHECK:BOOL=ON' "$build/CMakeCache.txt"; then
  rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
  # -O1 and line tables only, as libFuzzer's documentation builds (stack traces still name file and line); a unity
  # build, since the files of a library share most of what they include.
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=None -DFWLAB_TORCH=OFF -DFWLAB_FUZZ=ON \
    -DFWLAB_ABI_CHECK=ON -DCMAKE_UNITY_BUILD=ON \
    -DCMAKE_CXX_FLAGS="-O1 -gline-tables-only -D_GLIBCXX_USE_CXX11_ABI=0 \
      -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
      -fsanitize-ignorelist=$root/tests/fuzz/sanitizer_ignorelist.txt" >/dev/null
fi
# The fuzz targets, the ABI check and what they link, not the rest of the tree (the cli).
abi_programs=(fwlab_abi_link_check fwlab_abi_catch_check)
if ! cmake --build "$build" --parallel "$(nproc)" --target "${all_targets[@]/#/fuzz_}" "${abi_programs[@]}" \
  >"$build/build.log" 2>&1; then
  tail -40 "$build/build.log"
  exit 1
fi
[ "$build_only" = 1 ] && exit 0
if [ "$abi_check" = 1 ]; then
  for p in "${abi_programs[@]}"; do "$build/tests/abi/$p" || { echo "abi check: $p failed"; exit 1; }; done
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
for t in "${targets[@]}"; do
  exe=$build/tests/fuzz/fuzz_$t
  [ -x "$exe" ] || { echo "fuzz: no target '$t'"; exit 2; }
  mkdir -p "$work/$t" "$build/crashes/$t"
  dirs=("$work/$t")  # new inputs go to the scratch corpus; the seed folders are only read
  for d in "tests/fuzz/corpus/$t" "tests/fuzz/regressions/$t"; do [ -d "$d" ] && dirs+=("$d"); done
  log=$build/crashes/$t/last-run.log
  status=0
  UBSAN_OPTIONS=print_stacktrace=1 "$exe" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$build/crashes/$t/" "${dirs[@]}" >"$log" 2>&1 || status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  took=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  if [ "$status" -ne 0 ]; then
    failed=1
    echo "fuzz $t: FAILED (exit $status) after ${runs:-?} runs; input kept in $build/crashes/$t/"
    grep -E 'ERROR|SUMMARY|violated|terminate|runtime error' "$log" | head -5
  else
    echo "fuzz $t: ${runs:-?} runs in ${took:-$seconds} s, coverage ${cov:-?} edges, no crash"
  fi
done
exit $failed

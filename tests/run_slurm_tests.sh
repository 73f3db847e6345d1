#!/usr/bin/env bash
# ctest's `slurm`: starts a single-node Slurm on localhost (scripts/slurm_cluster.sh), runs the [slurm] tests of
# fwlab_tests against it, and stops it. Exit 77 (skipped) where the Slurm packages are missing.
set -uo pipefail
tests_bin=${1:?usage: run_slurm_tests.sh FWLAB_TESTS [catch2 args]}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
cluster=$(mktemp -d /tmp/fwlab-slurm-XXXXXX)
# A port of its own, so that test runs side by side (or beside the benchmark) do not meet.
out=$(bash "$root/scripts/slurm_cluster.sh" start "$cluster" "${FWLAB_SLURM_PORT:-$((20000 + ($$ % 4000) * 2))}")
code=$?
if [ $code -eq 77 ]; then echo "slurm tests skipped: the Slurm packages are not installed (scripts/setup.sh installs them)"; exit 77; fi
if [ $code -ne 0 ]; then echo "slurm tests: the local cluster did not start"; rm -rf "$cluster"; exit 1; fi
export "$out"
trap 'bash "$root/scripts/slurm_cluster.sh" stop "$cluster"; rm -rf "$cluster"' EXIT
"$tests_bin" "${@:-[slurm]}"

#!/usr/bin/env bash
# Slurm launcher benchmark: a 1,000-job grid of a trivial worker (tests/fake_worker.py) on a local single-node
# Slurm (scripts/slurm_cluster.sh). Prints the time to submit (one job array per wave), the time of one
# `fwlab sync` over 1,000 finished jobs (status files read, records ingested, sweep closed) and of one
# `fwlab status`, side by side with the per-job figures.
#   bench/slurm_bench.sh [BUILD_DIR] [N_JOBS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
n=${2:-1000}
fwlab=$build/cli/fwlab
work=$(mktemp -d /tmp/fwlab-slurm-bench-XXXXXX)
cluster=$work/cluster
set +e
# 16 job slots on this node: the jobs are trivial, and the figures are fwlab's, not the cluster's.
out=$(FWLAB_SLURM_CPUS=${FWLAB_SLURM_CPUS:-16} bash "$root/scripts/slurm_cluster.sh" start "$cluster" 17917)
code=$?
set -e
[ $code -eq 0 ] || { echo "slurm_bench: no local Slurm ($code)"; exit $code; }
export "$out"
trap 'bash "$root/scripts/slurm_cluster.sh" stop "$cluster"; rm -rf "$work"' EXIT

values=$(seq -s ', ' 1 "$n")
cat >"$work/grid.toml" <<TOML
[experiment]
name = "slurm_bench"
[defaults]
steps = 5
seed = 0
[stage.run]
mixer = "softmax"
[grid]
warmup_steps = [$values]
TOML
now() { date +%s.%N; }
t0=$(now)
"$fwlab" sweep "$work/grid.toml" --db "$work/r.db" --worker "$root/tests/fake_worker.py" --executor slurm --detach >/dev/null
t1=$(now)
"$fwlab" status --db "$work/r.db" >"$work/status-in-flight.out"
t1s=$(now)
echo "waiting for $n jobs to run on the local cluster ..."
while [ "$(squeue -h -r -t all -n fwlab -o %T | grep -c COMPLETED)" -lt "$n" ]; do sleep 2; done
t2=$(now)
"$fwlab" sync --db "$work/r.db" >"$work/sync.out"
t3=$(now)
"$fwlab" status --db "$work/r.db" >"$work/status.out"
t4=$(now)
finished=$(sqlite3 "$work/r.db" "SELECT COUNT(*) FROM jobs WHERE status = 'finished'")
waves=$(sqlite3 "$work/r.db" "SELECT COUNT(*) FROM waves")
awk -v n="$n" -v t0="$t0" -v t1="$t1" -v t1s="$t1s" -v t2="$t2" -v t3="$t3" -v t4="$t4" -v f="$finished" -v w="$waves" 'BEGIN {
  printf "Slurm launcher, %d jobs of a trivial worker on a local single-node Slurm\n", n
  printf "  submit (fwlab sweep --detach): %7.2f s  (%.2f ms/job, %d sbatch call(s)); target: a few seconds\n", t1 - t0, 1000 * (t1 - t0) / n, w
  printf "  one status, jobs in flight   : %7.2f s  (reconciles with squeue first)\n", t1s - t1
  printf "  the jobs ran (cluster time)   : %7.2f s\n", t2 - t1s
  printf "  one sync over %d finished   : %7.2f s  (%.2f ms/job); target < 2 s\n", n, t3 - t2, 1000 * (t3 - t2) / n
  printf "  one status, all recorded     : %7.2f s\n", t4 - t3
  printf "  jobs recorded finished        : %d of %d\n", f, n
}'
cat "$work/status.out"

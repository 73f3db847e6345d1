#!/usr/bin/env bash
# Small-model training speed: the MQAR learns profile's jobs (experiments/mqar.toml: 2 layers, d 64, vocabulary
# 8,192, 64 sequences of 64 tokens a step) as the sweep runs them, one thread each, one job at a time. Prints side
# by side, from one run:
#   1. every rule's step time (the median of its logged intervals' means, ms) against the same model's softmax step,
#      with the issue's bound max(3 x softmax, 40 ms);
#   2. the whole 5,000-step job of the deltanet and decay rows, wall time from its record (target: 3 minutes);
#   3. where a step's time goes: the softmax, deltanet and decay steps by operator (debug.profile_steps, self times
#      under libtorch's profiler, which adds its own cost to every operator it records).
# bench/README.md keeps what this printed before and after the small-model work.
#
#   bash bench/small_model_bench.sh [--steps N] [--no-jobs] [--no-profile] [--build DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=300 jobs=1 profile=1 build=build
while (($#)); do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --no-jobs) jobs=0; shift ;;
    --no-profile) profile=0; shift ;;
    --build) build=$2; shift 2 ;;
    *) echo "usage: bash bench/small_model_bench.sh [--steps N] [--no-jobs] [--no-profile] [--build DIR]" >&2; exit 2 ;;
  esac
done
fwlab=$build/cli/fwlab
[ -x "$fwlab" ] || { echo "no $fwlab: build first (bash scripts/setup.sh)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sweep() {  # sweep DB ARGS...: the learns profile at one learning rate and one seed, one job at a time
  local db=$1; shift
  "$fwlab" sweep experiments/mqar.toml --profile learns --db "$tmp/$db.db" -j 1 --threads 1 \
    --set 'grid.lr=[1e-3]' --set experiment.seeds=1 "$@" >"$tmp/$db.log" 2>&1 ||
    { cat "$tmp/$db.log" >&2; exit 1; }
}
echo "fwlab small-model bench: MQAR learns profile, 1 thread, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"

echo; echo "1. Step time, $steps steps a job (median of the 50-step intervals after the first)"
sweep steps --set train.steps="$steps" --set eval.every="$steps"
sqlite3 -separator ' ' "$tmp/steps.db" "
  WITH intervals AS (
    SELECT coalesce(json_extract(r.coords, '\$.rule'), r.stage) AS rule, m.value AS ms,
           ROW_NUMBER() OVER (PARTITION BY r.job_id ORDER BY m.value) AS i,
           COUNT(*) OVER (PARTITION BY r.job_id) AS n
    FROM runs r JOIN metrics m ON m.job_id = r.job_id AND m.key = 'step_ms' AND m.step > 50)
  SELECT rule, ms FROM intervals WHERE i = (n + 1) / 2" >"$tmp/steps.txt"
awk '
  { ms[$1] = $2; order[++n] = $1 }
  END {
    soft = ms["softmax"]; bound = 3 * soft > 40 ? 3 * soft : 40
    printf "%-16s %9s %10s %12s\n", "rule", "ms/step", "x softmax", "within bound"
    for (i = 1; i <= n; i++) {
      r = order[i]; if (r == "softmax") continue
      printf "%-16s %9.1f %10.2f %12s\n", r, ms[r], ms[r] / soft, ms[r] <= bound ? "yes" : "NO"
    }
    printf "%-16s %9.1f %10s %12s\n", "softmax", soft, "1.00", ""
    printf "bound: max(3 x softmax, 40 ms) = %.1f ms\n", bound
  }' "$tmp/steps.txt"

if ((jobs)); then
  echo; echo "2. Whole jobs (5,000 steps, evaluations every 250, the test at the end), target <= 180 s"
  sweep jobs --set 'grid.rule=["deltanet","decay"]'
  sqlite3 -separator ' ' "$tmp/jobs.db" "
    SELECT coalesce(json_extract(coords, '\$.rule'), stage), seconds, test_accuracy FROM runs ORDER BY stage, job_id" |
    awk '{ printf "%-16s %7.0f s  %-4s  test accuracy %.3f\n", $1, $2, $2 <= 180 || $1 == "softmax" ? "" : "OVER", $3 }'
fi

if ((profile)); then
  echo; echo "3. Where a step goes (steps 10-49 under the profiler)"
  sweep prof --set train.steps=60 --set eval.every=60 --set debug.profile_steps=40 \
    --set 'grid.rule=["deltanet","decay"]'
  sqlite3 -separator ' ' "$tmp/prof.db" "SELECT coalesce(json_extract(coords, '\$.rule'), stage), dir FROM runs
                                         ORDER BY stage, job_id" |
    while read -r rule dir; do
      echo "-- $rule"
      head -16 "$dir/op_profile.txt" | tail -15
      tail -1 "$dir/op_profile.txt"
    done
fi

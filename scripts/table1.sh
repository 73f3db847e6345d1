#!/usr/bin/env bash
# README's main job: Mao's Table 1 at a profile (default: quick) — sweep the grid, print the table (rules x
# {baseline, norm off, phi off}, test perplexity, N/A and * as in the paper) with how it compares with the paper,
# and write the divergence report, the plots and the results pages (`fwlab site`). Everything goes under one
# folder, a folder per profile: OUT/fwlab.db (the database), OUT/runs/ (the job folders), OUT/table.md,
# compare.md, report.md, plots/ and site/. Jobs that finished in an earlier call are not run again.
#   scripts/table1.sh [profile] [--out DIR]      (default DIR: out/table1-PROFILE in the clone; git ignores out/)
# The catalog's committed results (results/table1/) are scripts/results.sh's, not this script's.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=quick out=""
while (($#)); do
  case "$1" in
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    -*) echo "usage: scripts/table1.sh [profile] [--out DIR]" >&2; exit 2 ;;
    *) profile=$1; shift ;;
  esac
done
out=${out:-out/table1-$profile}
mkdir -p "$out"
db=$out/fwlab.db
fwlab() { env -u OPENBLAS_CORETYPE build/cli/fwlab "$@"; }
started=$(date +%s)
status=0
# One single-threaded job per core: the quick models are too small for two threads to halve a step, and the
# three seeds of each fine-tuning give the cores independent jobs.
fwlab sweep experiments/table1.toml --profile "$profile" --db "$db" -j "$(nproc)" --threads 1 || status=$?
[ "$status" -eq 130 ] && exit 130
took=$(($(date +%s) - started))
fwlab table experiments/table1.toml --profile "$profile" --db "$db" --out "$out/table.md"
fwlab table experiments/table1.toml --profile "$profile" --db "$db" --compare --out "$out/compare.md"
fwlab report experiments/table1.toml --profile "$profile" --db "$db" --out "$out/report.md"
fwlab plot experiments/table1.toml --profile "$profile" --db "$db" --out "$out/plots" > /dev/null
fwlab site --db "$db" --out "$out/site" > /dev/null  # every experiment the database holds, as pages
echo
cat "$out/table.md"
echo
echo "Beside the paper's numbers (Mao 2022, Table 1): $out/compare.md"
sed -n '/^Orderings that agree/,$p' "$out/compare.md"
echo
echo "Sweep: $((took / 60)) min $((took % 60)) s on $(nproc) cores (jobs that had already finished were not run again)"
echo "Divergence report: $out/report.md; plots (PNG, SVG): $out/plots/; database: $db"
echo "Pages: $out/site/index.html (open it in a browser), or live: build/cli/fwlab serve --db $db"
exit "$status"

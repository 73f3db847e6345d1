#!/usr/bin/env bash
# README's main job: Mao's Table 1 at a profile (default: quick, about 15 minutes on 2 cores) — sweep the grid
# into results/fwlab.db, print the table (rules x {baseline, norm off, phi off}, test perplexity, N/A and * as in
# the paper), and write the divergence report, the plots and the results pages (`fwlab site`, into
# results/site/). Jobs that finished in an earlier call are not run again. Usage: scripts/table1.sh [profile]
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${1:-quick}
db=${FWLAB_DB:-results/fwlab.db}
out=results/table1
[ "$profile" = quick ] || out=results/$profile/table1  # results/table1 holds the committed quick-profile outputs
fwlab() { env -u OPENBLAS_CORETYPE build/cli/fwlab "$@"; }
status=0
# One single-threaded job per core: the quick models are too small for two threads to halve a step, and the
# three seeds of each fine-tuning give the cores independent jobs.
fwlab sweep experiments/table1.toml --profile "$profile" --db "$db" -j "$(nproc)" --threads 1 || status=$?
[ "$status" -eq 130 ] && exit 130
mkdir -p "$out"
fwlab table experiments/table1.toml --profile "$profile" --db "$db" --out "$out/table.md"
fwlab table experiments/table1.toml --profile "$profile" --db "$db" --compare --out "$out/compare.md"
fwlab report experiments/table1.toml --profile "$profile" --db "$db" --out "$out/report.md"
fwlab plot experiments/table1.toml --profile "$profile" --db "$db" --out "$out/plots" > /dev/null
site=$(dirname "$db")/site  # every experiment the database holds, as pages (a browser opens index.html)
fwlab site --db "$db" --out "$site" > /dev/null
echo
cat "$out/table.md"
echo
echo "Beside the paper's numbers (Mao 2022, Table 1): $out/compare.md"
sed -n '/^Orderings that agree/,$p' "$out/compare.md"
echo
echo "Divergence report: $out/report.md; plots (PNG, SVG): $out/plots/; database: $db"
echo "Pages: $site/index.html (open it in a browser), or live: build/cli/fwlab serve --db $db"
exit "$status"

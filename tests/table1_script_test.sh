#!/usr/bin/env bash
# ctest's table1_script: README's main job at the smoke profile with --out: the database, job folders, tables,
# report, plots and pages all land in that one folder (not in the clone's results/), and a second call runs nothing.
set -euo pipefail
src=${1:?usage: table1_script_test.sh SOURCE_DIR}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
before=$(git -C "$src" status --porcelain -- results 2>/dev/null || true)
bash "$src/scripts/table1.sh" smoke --out "$tmp/t" > "$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
for f in fwlab.db table.md compare.md report.md site/index.html; do
  [ -s "$tmp/t/$f" ] || { echo "table1_script: $tmp/t/$f missing or empty"; cat "$tmp/log"; exit 1; }
done
ls "$tmp/t/plots/"*.png > /dev/null && ls -d "$tmp/t/runs/"* > /dev/null
grep -q "| delta |" "$tmp/log" || { echo "table1_script: the table was not printed"; cat "$tmp/log"; exit 1; }
after=$(git -C "$src" status --porcelain -- results 2>/dev/null || true)
[ "$before" = "$after" ] || { echo "table1_script: it changed the clone's results/"; exit 1; }
bash "$src/scripts/table1.sh" smoke --out "$tmp/t" > "$tmp/log2" 2>&1
grep -q "already done" "$tmp/log2" && ! grep -q "fwlab: started" "$tmp/log2" ||
  { echo "table1_script: the second call ran jobs again"; cat "$tmp/log2"; exit 1; }
echo "table1_script: every output under --out; the second call ran nothing"

#!/usr/bin/env bash
# ctest `browser`: fwlab's pages in a real browser. Debian's chromium, headless, loads the index and an
# experiment page of `fwlab site`, then of `fwlab serve` on a loopback port, and the DOM it built must hold the
# table's numbers (as `fwlab table --format csv` prints them), the comparison and the divergence report as HTML
# tables (no Markdown in a <pre>), one inline SVG per table row with one series per cell, the stability bars, the
# plots, a job's inline SVG curves, the runs pages sorted and filtered, and no trace of the <script> planted in a
# label, the description and the caption. Screenshots are kept as artifacts.
# Usage: run.sh FWLAB FAKE_WORKER ARTIFACT_DIR. Exit 77 (skipped) without chromium.
set -euo pipefail
fwlab=$1 worker=$2 artifacts=$3
chrome=$(command -v chromium || true)
if [ -z "$chrome" ]; then
  echo "browser test skipped: chromium is not installed (scripts/setup.sh installs it)"
  exit 77
fi
mkdir -p "$artifacts"
tmp=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cat >"$tmp/b.toml" <<'TOML'
[experiment]
name = "browser"
description = "quotes \" ' and <script>document.body.setAttribute('data-pwned','1')</script>"
[defaults]
steps = 4
[stage.pretrain]
mixer = "fast_weight"
m = 4
norm = "none"
[grid]
rule = ["add", "decay"]
seed = [0, 3]   # the fake worker diverges at seed 3
[table]
rows = ["rule"]
columns = ["seed"]
metric = "valid_loss"
caption = "**Loss** by rule, <script>document.body.setAttribute('data-pwned','3')</script>"
labels = { add = "<script>document.body.setAttribute('data-pwned','2')</script>\"add'" }
[published]
source = "a made-up paper, Table 0"
columns = ["0", "3"]
better = "lower"
[published.rows]
add = [0.4, "*"]
decay = [0.6, 0.7]
TOML
"$fwlab" sweep "$tmp/b.toml" --db "$tmp/fwlab.db" --worker "$worker" >/dev/null
"$fwlab" site "$tmp/b.toml" --db "$tmp/fwlab.db" --out "$tmp/site"

chrome_run() { timeout 90 "$chrome" --headless --no-sandbox --disable-gpu --no-first-run "$@" 2>/dev/null; }
dom() { chrome_run --dump-dom "$1"; }

# The table's value cells, as the command line prints them.
mapfile -t numbers < <("$fwlab" table "$tmp/b.toml" --db "$tmp/fwlab.db" --format csv | tail -n +2 | cut -d, -f2- | tr ',' '\n' | grep -E '^[0-9.]+$' | sort -u)
[ ${#numbers[@]} -gt 0 ] || fail "fwlab table printed no numbers"

check_experiment_dom() {  # FILE WHERE
  local f=$1 where=$2
  grep -q '<caption>browser' "$f" || fail "$where: no table caption"
  for n in "${numbers[@]}"; do grep -q "<td><a href=\"../job/[0-9a-f]*.html\">$n</a>" "$f" || fail "$where: the table's $n is not a linked cell"; done
  grep -q '<img class="plot" alt="[^"]*" src="data:image/svg+xml;base64,' "$f" || fail "$where: no plot"
  ! grep -q 'data-pwned="' "$f" || fail "$where: a planted script ran"
  ! grep -qi '<script' "$f" || fail "$where: a <script> element is in the DOM"
  grep -q '&lt;script&gt;document.body.setAttribute' "$f" || fail "$where: the planted text is not shown as text"
  grep -q "&lt;script&gt;document.body.setAttribute('data-pwned','3')" "$f" || fail "$where: the caption's planted text is not text"
  grep -q '<strong>Loss</strong> by rule' "$f" || fail "$where: the caption's Markdown is not rendered"
  ! grep -q '<pre' "$f" || fail "$where: a <pre> is left (Markdown shown as source)"
  grep -q '<h4>browser against a made-up paper' "$f" && grep -q '<th align="right">seed=3</th>' "$f" || fail "$where: the comparison is not an HTML table"
  grep -q '<th align="left">cause</th>' "$f" || fail "$where: the divergence report's tables are not HTML tables"
  grep -q '<svg class="chart bars"' "$f" || fail "$where: no stability bars"
  # One chart per row, one series per cell of that row (2 columns: seed 0 and 3), the diverged one crossed.
  local row
  row=$(awk '/<svg class="chart".*row decay, one line per column/,/<\/svg>/' "$f")
  [ "$(grep -c '<g class="series"' <<<"$row")" = 2 ] || fail "$where: the row chart of decay does not hold 2 series: $row"
  grep -q 'class="diverged"' <<<"$row" && grep -q 'seed=3 — diverged at step 4' <<<"$row" || fail "$where: the diverged run is not crossed"
}
# The runs page as a table: RUNS_DOM, then the rule column's values from top to bottom.
runs_rules() { grep -o '<tr><td class="label"><a href="../job/[0-9a-f]*.html">[0-9a-f]*</a></td><td class="label">pretrain</td><td class="label">[a-z]*</td><td class="label">[0-9]</td>' "$1" | sed 's/.*<td class="label">\([a-z]*\)<\/td><td class="label">\([0-9]\)<\/td>$/\1\2/' | tr '\n' ' '; }

dom "file://$tmp/site/index.html" >"$tmp/index.dom"
grep -q '<a href="e/browser.html">browser</a>' "$tmp/index.dom" || fail "site index: no link to the experiment"
dom "file://$tmp/site/e/browser.html" >"$tmp/e.dom"
check_experiment_dom "$tmp/e.dom" "site experiment page"
job=$(grep -o 'job/[0-9a-f]*\.html' "$tmp/e.dom" | head -1)
dom "file://$tmp/site/$job" >"$tmp/job.dom"
grep -q '<svg class="chart"' "$tmp/job.dom" && grep -q '<polyline' "$tmp/job.dom" || fail "site job page: no inline SVG curve"
chrome_run --window-size=1200,2400 --screenshot="$artifacts/site-experiment.png" "file://$tmp/site/e/browser.html" >/dev/null
# Static runs pages: the seed column sorted descending, and the runs of rule = decay alone.
grep -q '<a href="browser.runs.html">Every run</a>' "$tmp/e.dom" || fail "site experiment page: no link to its runs"
dom "file://$tmp/site/e/browser.runs.html" >"$tmp/runs.dom"
[ "$(runs_rules "$tmp/runs.dom")" = "add0 add3 decay0 decay3 " ] || fail "site runs page, grid order: $(runs_rules "$tmp/runs.dom")"
sorted=$(grep -o '<a href="browser.runs.s[0-9]*a.html">seed</a>' "$tmp/runs.dom" | sed 's/.*href="\([^"]*\)".*/\1/')
[ -n "$sorted" ] || fail "site runs page: the seed column is not a sort link"
dom "file://$tmp/site/e/${sorted%a.html}d.html" >"$tmp/runs-sorted.dom"
[ "$(runs_rules "$tmp/runs-sorted.dom")" = "add3 decay3 add0 decay0 " ] || fail "site runs page by seed, descending: $(runs_rules "$tmp/runs-sorted.dom")"
decay=$(grep -o '<a href="browser.runs.f[0-9]*-[0-9]*.html">decay</a>' "$tmp/runs.dom" | sed 's/.*href="\([^"]*\)".*/\1/')
dom "file://$tmp/site/e/$decay" >"$tmp/runs-decay.dom"
[ "$(runs_rules "$tmp/runs-decay.dom")" = "decay0 decay3 " ] || fail "site runs page, rule = decay: $(runs_rules "$tmp/runs-decay.dom")"
chrome_run --window-size=1200,700 --screenshot="$artifacts/site-runs.png" "file://$tmp/site/e/browser.runs.html" >/dev/null
[ -s "$artifacts/site-experiment.png" ] || fail "no screenshot"

"$fwlab" serve "$tmp/b.toml" --db "$tmp/fwlab.db" --port 0 >"$tmp/serve.log" 2>&1 &
server=$!
url=
for _ in $(seq 100); do
  url=$(sed -n 's/.* at \(http:[^ ]*\) .*/\1/p' "$tmp/serve.log")
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || fail "fwlab serve did not start: $(cat "$tmp/serve.log")"
case "$url" in http://127.0.0.1:*) ;; *) fail "serve is not on loopback: $url" ;; esac
dom "${url}index.html" >"$tmp/served-index.dom"
grep -q '<a href="e/browser.html">browser</a>' "$tmp/served-index.dom" || fail "served index: no link to the experiment"
dom "${url}e/browser.html" >"$tmp/served-e.dom"
check_experiment_dom "$tmp/served-e.dom" "served experiment page"
# Served runs page: a filter and a sort combined in the query; an unknown setting is a 400 that names it.
dom "${url}e/browser.runs.html?rule=add&sort=seed&order=desc" >"$tmp/served-runs.dom"
[ "$(runs_rules "$tmp/served-runs.dom")" = "add3 add0 " ] || fail "served runs page, rule = add by seed descending: $(runs_rules "$tmp/served-runs.dom")"
grep -q '<a href="browser.runs.html?sort=seed&amp;rule=add">seed</a> ▼' "$tmp/served-runs.dom" || fail "served runs page: the seed header does not keep the filter"
dom "${url}e/browser.runs.html?colour=red" >"$tmp/served-bad.dom"
grep -q "the runs page has no setting 'colour'" "$tmp/served-bad.dom" || fail "served runs page: an unknown setting is not named"
chrome_run --window-size=1200,1400 --screenshot="$artifacts/serve-experiment.png" "${url}e/browser.html" >/dev/null
echo "browser: site and serve pages checked in $("$chrome" --version 2>/dev/null); screenshots in $artifacts"

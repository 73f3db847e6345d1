#!/usr/bin/env bash
# ctest `browser`: fwlab's pages in a real browser. Debian's chromium, headless, loads the index and an
# experiment page of `fwlab site`, then of `fwlab serve` on a loopback port, and the DOM it built must hold the
# table's numbers (as `fwlab table --format csv` prints them), the plots, a job's inline SVG curves, and no trace
# of the <script> planted in a label and in the description. Screenshots are kept as artifacts.
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
[table]
rows = ["rule"]
metric = "valid_loss"
labels = { add = "<script>document.body.setAttribute('data-pwned','2')</script>\"add'" }
TOML
"$fwlab" sweep "$tmp/b.toml" --db "$tmp/fwlab.db" --worker "$worker" >/dev/null
"$fwlab" site "$tmp/b.toml" --db "$tmp/fwlab.db" --out "$tmp/site"

chrome_run() { timeout 90 "$chrome" --headless --no-sandbox --disable-gpu --no-first-run "$@" 2>/dev/null; }
dom() { chrome_run --dump-dom "$1"; }

# The table's value cells, as the command line prints them.
mapfile -t numbers < <("$fwlab" table "$tmp/b.toml" --db "$tmp/fwlab.db" --format csv | tail -n +2 | cut -d, -f2- | tr ',' '\n' | grep -E '^[0-9.]+$')
[ ${#numbers[@]} -gt 0 ] || fail "fwlab table printed no numbers"

check_experiment_dom() {  # FILE WHERE
  local f=$1 where=$2
  grep -q '<caption>browser' "$f" || fail "$where: no table caption"
  for n in "${numbers[@]}"; do grep -q "<td><a href=\"../job/[0-9a-f]*.html\">$n</a>" "$f" || fail "$where: the table's $n is not a linked cell"; done
  grep -q '<img class="plot" alt="[^"]*" src="data:image/svg+xml;base64,' "$f" || fail "$where: no plot"
  ! grep -q 'data-pwned="' "$f" || fail "$where: a planted script ran"
  ! grep -qi '<script' "$f" || fail "$where: a <script> element is in the DOM"
  grep -q '&lt;script&gt;document.body.setAttribute' "$f" || fail "$where: the planted text is not shown as text"
}

dom "file://$tmp/site/index.html" >"$tmp/index.dom"
grep -q '<a href="e/browser.html">browser</a>' "$tmp/index.dom" || fail "site index: no link to the experiment"
dom "file://$tmp/site/e/browser.html" >"$tmp/e.dom"
check_experiment_dom "$tmp/e.dom" "site experiment page"
job=$(grep -o 'job/[0-9a-f]*\.html' "$tmp/e.dom" | head -1)
dom "file://$tmp/site/$job" >"$tmp/job.dom"
grep -q '<svg class="chart"' "$tmp/job.dom" && grep -q '<polyline' "$tmp/job.dom" || fail "site job page: no inline SVG curve"
chrome_run --window-size=1200,1400 --screenshot="$artifacts/site-experiment.png" "file://$tmp/site/e/browser.html" >/dev/null
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
chrome_run --window-size=1200,1400 --screenshot="$artifacts/serve-experiment.png" "${url}e/browser.html" >/dev/null
echo "browser: site and serve pages checked in $("$chrome" --version 2>/dev/null); screenshots in $artifacts"

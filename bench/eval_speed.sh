#!/usr/bin/env bash
# Evaluation speed of a softmax model against the same model converted to the decay rule, measured side by side
# in one run (issue 27's figures): documents/s of a multiple-choice task (the Brown cloze, 4 endings a document,
# scored by log-likelihood in length-sorted batches) and tokens/s of passkey retrieval at a context of LENGTH
# (prompt + greedy generation through the step forms: the KV cache for softmax, the constant-size state for decay).
# The models are the quick profile's shape (4 layers, d 128, byte-level) after one training step: speed does not
# depend on what the weights learnt.
# Usage: bench/eval_speed.sh [LENGTH] [CLOZE_DOCS] [PASSKEY_TRIALS]
set -euo pipefail
cd "$(dirname "$0")/.."
length=${1:-4000} docs=${2:-200} trials=${3:-3}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/eval_speed.toml" <<TOML
[experiment]
name = "eval_speed"
description = "evaluation speed, softmax vs decay"
[defaults]
data = "brown"
tokenizer = "byte"
[defaults.model]
vocab = 256
d_model = 128
n_layers = 4
n_heads = 4
head_dim = 32
context = $((length + 96))
[defaults.train]
steps = 1
batch_size = 1
seq_len = 128
[defaults.eval]
every = 1
max_tokens = 128
batch_size = 16
[defaults.tasks.cloze]
adapter = "hellaswag"
path = "data/tasks/brown/cloze.jsonl"
limit = $docs
[defaults.tasks.passkey]
lengths = [$length]
depths = [50]
trials = $trials
max_new_tokens = 10
[stage.softmax]
mixer = "softmax"
[stage.decay]
from = "softmax"
mixer = "fast_weight"
rule = "decay"
feature_map = "hedgehog"
norm = "none"
m = 16
[stage.eval_softmax]
from = "softmax"
kind = "eval"
[stage.eval_decay]
from = "decay"
kind = "eval"
TOML
build/cli/fwlab sweep "$dir/eval_speed.toml" --db "$dir/fwlab.db" --jobs 1 > "$dir/sweep.log" 2>&1 || { cat "$dir/sweep.log"; exit 1; }
/usr/bin/python3 - "$dir/fwlab.db" "$length" <<'PY'
import json, sqlite3, sys
db, length = sqlite3.connect(sys.argv[1]), int(sys.argv[2])
rows = db.execute("SELECT j.stage, e.body FROM events e JOIN jobs j ON j.id = e.job_id WHERE e.type = 'task' ORDER BY j.stage").fetchall()
speed = {}
for stage, body in rows:
    b = json.loads(body)
    speed[(stage.removeprefix("eval_"), b["name"])] = (b["documents"], b["seconds"])
print("evaluation speed, 4 layers, d 128, byte-level, one job using every core of this machine")
for model in ("softmax", "decay"):
    d, s = speed[(model, "cloze")]
    pd, ps = speed[(model, "passkey")]
    print(f"{model:>8}: cloze {d / s:8.1f} documents/s ({d} in {s:.1f} s) | passkey at {length} tokens: "
          f"{pd * (length + 10) / ps:8.1f} tokens/s ({pd} prompts in {ps:.1f} s)")
for task in ("cloze", "passkey"):
    (d1, s1), (d2, s2) = speed[("softmax", task)], speed[("decay", task)]
    print(f"decay / softmax, {task}: {(d2 / s2) / (d1 / s1):.2f}x")
PY

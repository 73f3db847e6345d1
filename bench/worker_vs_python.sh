#!/usr/bin/env bash
# Throughput of the same softmax GPT (vocab 256, d_model 128, 4 layers, T 256, batch 16, AdamW, grad clip 1.0)
# trained for the same steps by fwlab-worker and by Python PyTorch (/usr/bin/python3), measured one after the
# other in one run, with the ratio. Target: fwlab >= 0.95x Python. Usage: bench/worker_vs_python.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-40}
threads=$(nproc)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/job.json" <<JSON
{"seed": 0, "threads": $threads,
 "model": {"vocab": 256, "d_model": 128, "n_layers": 4, "n_heads": 4, "head_dim": 32, "context": 256, "dropout": 0.1},
 "optim": {"lr": 6e-4, "weight_decay": 0.1},
 "train": {"steps": $steps, "batch_size": 16, "seq_len": 256, "log_every": 5},
 "eval": {"every": 0, "max_tokens": 256, "test": false}}
JSON
env -u OPENBLAS_CORETYPE build/worker/fwlab-worker run "$dir" >/dev/null
fw=$(/usr/bin/python3 -c '
import json, statistics, sys
rates = [e["value"] for e in map(json.loads, open(sys.argv[1])) if e.get("key") == "tokens_per_s"]
print(f"{statistics.median(rates[1:]):.1f}")' "$dir/events.jsonl")
py=$(env -u OPENBLAS_CORETYPE /usr/bin/python3 bench/python_train.py data/brown "$steps" 16 256 "$threads")
echo "softmax GPT (vocab 256, d 128, 4 layers, T 256, batch 16), $steps steps, $threads threads"
echo "fwlab-worker   : $fw tokens/s"
echo "Python PyTorch : $py tokens/s"
/usr/bin/python3 -c "import sys; r = float(sys.argv[1]) / float(sys.argv[2]); print(f'ratio fwlab/Python: {r:.3f} (target >= 0.95: {\"met\" if r >= 0.95 else \"NOT met\"})')" "$fw" "$py"

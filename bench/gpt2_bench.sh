#!/usr/bin/env bash
# GPT-2 small (124,439,808 parameters, random weights in Hugging Face's layout) on the CPU, measured side by side
# in one run: forward and forward+backward tokens/s of fwlab and of Python PyTorch (/usr/bin/python3, the same
# weights, the same threads, no dropout), with the ratio (target >= 0.95x); then fwlab's greedy generation
# tokens/s with 128 and 1024 tokens of context, softmax vs the same model converted to decay.
# Usage: bench/gpt2_bench.sh [BATCH] [SEQ] [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
batch=${1:-1} seq=${2:-256} repeats=${3:-5}
threads=$(nproc)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 tests/python/hf_gpt2.py write "$dir" --vocab 50257 --embd 768 --heads 12 --layers 12 --positions 1024 \
  --shards 1 --no-expected
pybench=(env -u OPENBLAS_CORETYPE /usr/bin/python3 tests/python/hf_gpt2.py bench "$dir" --threads "$threads" --batch "$batch"
  --seq "$seq" --repeats "$repeats")
py=$("${pybench[@]}")
# fwlab keeps large freed blocks mapped (kernels/memory_policy.h); the same glibc policy for Python, to compare
# the arithmetic rather than the allocator.
py_same_malloc=$(GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=536870912 "${pybench[@]}")
fw=$(env -u OPENBLAS_CORETYPE build/bench/fwlab-bench-gpt2 "$dir" --threads "$threads" --batch "$batch" --seq "$seq" \
  --repeats "$repeats")
/usr/bin/python3 - "$py" "$py_same_malloc" "$fw" <<'PY'
import json, sys
py, py_malloc = json.loads(sys.argv[1]), json.loads(sys.argv[2])
lines = [json.loads(l) for l in sys.argv[3].splitlines()]
fw = lines[0]
print(f"GPT-2 small ({fw['params']:,} parameters), batch {fw['batch']} x {fw['seq']} tokens, {fw['threads']} threads, CPU")
for key, what in [("forward_tokens_per_s", "forward"), ("train_tokens_per_s", "forward+backward")]:
    r, rm = fw[key] / py[key], fw[key] / py_malloc[key]
    print(f"{what:>17}: fwlab {fw[key]:8.1f} tokens/s | Python PyTorch {py[key]:8.1f} (ratio {r:.3f}), with fwlab's "
          f"malloc policy {py_malloc[key]:8.1f} (ratio {rm:.3f}; target >= 0.95: {'met' if min(r, rm) >= 0.95 else 'NOT met'})")
for g in lines[1:]:
    print(f"greedy generation, {g['generation']:>11}, context {g['context']:>9}: {g['tokens_per_s']:7.2f} tokens/s")
PY

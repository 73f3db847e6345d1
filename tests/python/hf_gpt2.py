#!/usr/bin/python3
"""An independent GPT-2 in Hugging Face's exact layout, for cross-checking fwlab's importer (no shared code).

Usage:
  hf_gpt2.py write DIR [--vocab V --embd D --heads H --layers L --positions P --seed S --shards N --dtype F32]
      Writes a random GPT-2 as Hugging Face stores it: config.json (gelu_new), the tensors named
      transformer.h.N.attn.c_attn.weight ... with Conv1D's [in, out] orientation, the causal-mask buffers of
      older files (attn.bias, attn.masked_bias), lm_head.weight tied to wte, split over N shards with
      model.safetensors.index.json (N = 1: model.safetensors). Then DIR/expected.json: the logits of a prompt
      and a greedy continuation, computed here with plain PyTorch from the formulas (full forward each step).
  hf_gpt2.py bench DIR --threads T --batch B --seq S --repeats R
      Times forward and forward+backward of the same model in plain PyTorch; prints JSON tokens/s.
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import torch

DTYPES = {"F32": torch.float32, "F16": torch.float16, "F64": torch.float64, "U8": torch.uint8}
NAMES = {v: k for k, v in DTYPES.items()}


def write_safetensors(path, tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.contiguous()
        raw = t.numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[8 + n + b:8 + n + end]), dtype=DTYPES[e["dtype"]]).reshape(e["shape"])
    return out


def random_gpt2(cfg, seed, dtype):
    g = torch.Generator().manual_seed(seed)
    d, V, P, L = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"], cfg["n_layer"]

    def normal(*shape, std=0.02):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * std).to(dtype)

    def around_one(n):
        return (1.0 + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)).to(dtype)

    W = {"transformer.wte.weight": normal(V, d, std=0.5), "transformer.wpe.weight": normal(P, d, std=0.1)}
    for i in range(L):
        h = f"transformer.h.{i}."
        W[h + "ln_1.weight"], W[h + "ln_1.bias"] = around_one(d), normal(d)
        W[h + "attn.c_attn.weight"], W[h + "attn.c_attn.bias"] = normal(d, 3 * d, std=0.3), normal(3 * d)
        W[h + "attn.c_proj.weight"], W[h + "attn.c_proj.bias"] = normal(d, d, std=0.2), normal(d)
        W[h + "ln_2.weight"], W[h + "ln_2.bias"] = around_one(d), normal(d)
        W[h + "mlp.c_fc.weight"], W[h + "mlp.c_fc.bias"] = normal(d, 4 * d, std=0.2), normal(4 * d)
        W[h + "mlp.c_proj.weight"], W[h + "mlp.c_proj.bias"] = normal(4 * d, d, std=0.1), normal(d)
        # The buffers older transformers versions saved: a causal mask and the masking constant.
        W[h + "attn.bias"] = torch.tril(torch.ones(P, P, dtype=torch.uint8)).view(1, 1, P, P)
        W[h + "attn.masked_bias"] = torch.tensor(-1e4, dtype=dtype)
    W["transformer.ln_f.weight"], W["transformer.ln_f.bias"] = around_one(d), normal(d)
    W["lm_head.weight"] = W["transformer.wte.weight"].clone()
    return W


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def forward(W, cfg, ids):
    """GPT-2 as Hugging Face computes it: Conv1D is x @ W + b, heads split q|k|v, causal softmax, tied output."""
    d, H, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    hd = d // H
    B, T = ids.shape
    x = W["transformer.wte.weight"][ids] + W["transformer.wpe.weight"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(cfg["n_layer"]):
        h = f"transformer.h.{i}."
        a = layer_norm(x, W[h + "ln_1.weight"], W[h + "ln_1.bias"], eps)
        qkv = a @ W[h + "attn.c_attn.weight"] + W[h + "attn.c_attn.bias"]
        q, k, v = qkv.split(d, dim=2)
        q, k, v = (t.view(B, T, H, hd).transpose(1, 2) for t in (q, k, v))
        s = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
        s = s.masked_fill(~mask, torch.finfo(s.dtype).min)
        y = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, d)
        x = x + y @ W[h + "attn.c_proj.weight"] + W[h + "attn.c_proj.bias"]
        m = layer_norm(x, W[h + "ln_2.weight"], W[h + "ln_2.bias"], eps)
        m = gelu_new(m @ W[h + "mlp.c_fc.weight"] + W[h + "mlp.c_fc.bias"])
        x = x + m @ W[h + "mlp.c_proj.weight"] + W[h + "mlp.c_proj.bias"]
    x = layer_norm(x, W["transformer.ln_f.weight"], W["transformer.ln_f.bias"], eps)
    return x @ W["transformer.wte.weight"].T


def forward_fast(W, cfg, ids, mask):
    """The same GPT-2 with PyTorch's fastest standard ops, as Hugging Face's eager GPT2 runs it (Conv1D as addmm,
    fused LayerNorm, torch's tanh GELU = gelu_pytorch_tanh): the baseline the benchmark compares fwlab with."""
    d, H, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    hd = d // H
    B, T = ids.shape
    F = torch.nn.functional

    def conv1d(x, p):
        return torch.addmm(W[p + ".bias"], x.reshape(-1, x.shape[-1]), W[p + ".weight"]).view(B, T, -1)

    x = W["transformer.wte.weight"][ids] + W["transformer.wpe.weight"][:T]
    for i in range(cfg["n_layer"]):
        h = f"transformer.h.{i}."
        a = F.layer_norm(x, (d,), W[h + "ln_1.weight"], W[h + "ln_1.bias"], eps)
        q, k, v = conv1d(a, h + "attn.c_attn").split(d, dim=2)
        q, k, v = (t.view(B, T, H, hd).transpose(1, 2) for t in (q, k, v))
        s = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
        s = s.masked_fill(mask[:T, :T], float("-inf"))
        y = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, d)
        x = x + conv1d(y, h + "attn.c_proj")
        m = F.layer_norm(x, (d,), W[h + "ln_2.weight"], W[h + "ln_2.bias"], eps)
        x = x + conv1d(F.gelu(conv1d(m, h + "mlp.c_fc"), approximate="tanh"), h + "mlp.c_proj")
    x = F.layer_norm(x, (d,), W["transformer.ln_f.weight"], W["transformer.ln_f.bias"], eps)
    return x @ W["transformer.wte.weight"].T


def write(args):
    os.makedirs(args.dir, exist_ok=True)
    cfg = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "activation_function": "gelu_new",
           "vocab_size": args.vocab, "n_positions": args.positions, "n_ctx": args.positions, "n_embd": args.embd,
           "n_head": args.heads, "n_layer": args.layers, "n_inner": None, "layer_norm_epsilon": 1e-5,
           "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1, "initializer_range": 0.02,
           "scale_attn_weights": True, "bos_token_id": args.vocab - 1, "eos_token_id": args.vocab - 1}
    with open(os.path.join(args.dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    W = random_gpt2(cfg, args.seed, DTYPES[args.dtype])
    names = list(W)
    if args.shards == 1:
        write_safetensors(os.path.join(args.dir, "model.safetensors"), W, {"format": "pt"})
    else:
        per = math.ceil(len(names) / args.shards)
        weight_map, total = {}, 0
        for s in range(args.shards):
            file = f"model-{s + 1:05d}-of-{args.shards:05d}.safetensors"
            part = {n: W[n] for n in names[s * per:(s + 1) * per]}
            write_safetensors(os.path.join(args.dir, file), part, {"format": "pt"})
            for n, t in part.items():
                weight_map[n] = file
                total += t.numel() * t.element_size()
        with open(os.path.join(args.dir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    if not args.expected:
        return
    Wf = {n: t.to(torch.float64) if t.is_floating_point() else t for n, t in W.items()}
    g = torch.Generator().manual_seed(args.seed + 1)
    prompt = torch.randint(0, args.vocab, (1, 8), generator=g)
    with torch.no_grad():
        logits = forward(W, cfg, prompt)
        mask = ~torch.tril(torch.ones(args.positions, args.positions, dtype=torch.bool))
        fast = forward_fast(W, cfg, prompt, mask)  # the benchmark's baseline computes the same function
        assert (fast - logits).abs().max().item() < 1e-4, "forward_fast disagrees with forward"
        ids = prompt.clone()
        for _ in range(args.generate):  # greedy, full forward each step; float64 so that no near-tie decides
            nxt = forward(Wf, cfg, ids)[0, -1].argmax()
            ids = torch.cat([ids, nxt.view(1, 1)], 1)
    with open(os.path.join(args.dir, "expected.json"), "w") as f:
        json.dump({"prompt": prompt[0].tolist(), "logits": logits[0].tolist(), "greedy": ids[0, 8:].tolist()}, f)


def bench(args):
    torch.set_num_threads(args.threads)
    with open(os.path.join(args.dir, "config.json")) as f:
        cfg = json.load(f)
    W = {}
    index = os.path.join(args.dir, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
    for file in files:
        W.update(read_safetensors(os.path.join(args.dir, file)))
    W = {n: t for n, t in W.items() if t.is_floating_point() and t.dim() > 0 and n != "lm_head.weight"}
    ids = torch.randint(0, cfg["vocab_size"], (args.batch, args.seq + 1), generator=torch.Generator().manual_seed(0))
    x, y = ids[:, :-1], ids[:, 1:]
    P = cfg["n_positions"]
    mask = ~torch.tril(torch.ones(P, P, dtype=torch.bool))
    out = {}

    def median_rate(step):
        step()  # warm-up
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        return args.batch * args.seq / sorted(times)[len(times) // 2]

    with torch.no_grad():
        out["forward_tokens_per_s"] = median_rate(lambda: forward_fast(W, cfg, x, mask))
    params = [t.requires_grad_() for t in W.values()]

    def train_step():
        for p in params:
            p.grad = None
        logits = forward_fast(W, cfg, x, mask)
        torch.nn.functional.cross_entropy(logits.reshape(-1, cfg["vocab_size"]), y.reshape(-1)).backward()

    out["train_tokens_per_s"] = median_rate(train_step)
    print(json.dumps(out))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["write", "bench"])
    p.add_argument("dir")
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--embd", type=int, default=32)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--positions", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shards", type=int, default=2)
    p.add_argument("--dtype", default="F32", choices=["F32", "F16", "F64"])
    p.add_argument("--generate", type=int, default=12)
    p.add_argument("--no-expected", dest="expected", action="store_false")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    write(args) if args.command == "write" else bench(args)


if __name__ == "__main__":
    sys.exit(main())

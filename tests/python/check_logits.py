#!/usr/bin/python3
"""Independent re-implementation of fwlab's decoder, for cross-checking the C++ (no shared code).

Usage: check_logits.py MODEL.safetensors IO.safetensors [MODEL IO ...] [--tol T]

Each MODEL is an fwlab checkpoint (config in __metadata__["fwlab.model_config"]); each IO file holds
"input_ids" (I64, [B, T]) and the "logits" the C++ model produced. The model is rebuilt here from the
formulas of the papers (one token at a time, plain PyTorch ops) and its logits compared with the C++ ones.
Prints one line per model and exits 1 if any differs by more than the tolerance.
"""
import json
import math
import struct
import sys

import torch
import torch.nn.functional as F

DTYPES = {"F64": torch.float64, "F32": torch.float32, "I64": torch.int64, "I32": torch.int32}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        buf = bytearray(data[base + begin:base + end])
        tensors[name] = torch.frombuffer(buf, dtype=DTYPES[entry["dtype"]]).reshape(entry["shape"])
    return meta, tensors


def linear(x, W, prefix):
    y = x @ W[prefix + "weight"].T
    return y + W[prefix + "bias"] if prefix + "bias" in W else y


def softmax_attention(x, W, p, cfg, window):
    B, T, _ = x.shape
    H, hd = cfg["n_heads"], cfg["head_dim"]
    q, k, v = linear(x, W, p + "qkv.").split(H * hd, -1)
    q, k, v = (t.reshape(B, T, H, hd) for t in (q, k, v))
    out = torch.zeros(B, T, H, hd, dtype=x.dtype)
    for t in range(T):
        lo = max(0, t - window + 1) if window else 0
        scores = torch.einsum("bhd,bshd->bhs", q[:, t], k[:, lo:t + 1]) / math.sqrt(hd)
        out[:, t] = torch.einsum("bhs,bshd->bhd", torch.softmax(scores, -1), v[:, lo:t + 1])
    return linear(out.reshape(B, T, H * hd), W, p + "o.")


def feature_map(x, W, p, spec, hd, is_query):
    kind = spec["feature_map"]
    if kind in ("relu", "identity"):
        if is_query:
            x = x / math.sqrt(hd)  # T2R scales queries before the map
        y = torch.einsum("bhd,hmd->bhm", x, W[p + "phi.weight"])
        return torch.relu(y + W[p + "phi.bias"]) if kind == "relu" else y
    if kind == "elu1":
        return F.elu(x) + 1
    raise SystemExit(f"check_logits.py: feature map {kind} not implemented here")


def l2norm(x):
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)  # eps inside the sqrt, as fla's l2norm


def fast_weight(x, W, p, cfg, spec):
    B, T, _ = x.shape
    H, hd, m = cfg["n_heads"], cfg["head_dim"], spec["m"]
    rule, attn = spec["rule"], spec["norm"] == "attn"
    q, k, v = linear(x, W, p + "qkv.").split(H * hd, -1)
    q, k, v = (t.reshape(B, T, H, hd) for t in (q, k, v))
    S = torch.zeros(B, H, hd, m, dtype=x.dtype)
    z = torch.zeros(B, H, m, dtype=x.dtype)
    out = torch.zeros(B, T, H, hd, dtype=x.dtype)
    for t in range(T):
        fq = feature_map(q[:, t], W, p, spec, hd, True)
        fk = feature_map(k[:, t], W, p, spec, hd, False)
        vt = v[:, t]
        if rule == "add":
            S = S + vt[..., :, None] * fk[..., None, :]
            z = z + fk
        elif rule == "gated":
            g = torch.sigmoid(linear(x[:, t], W, p + "gate.")).reshape(B, H, 1)
            S = g[..., None] * S + (1 - g)[..., None] * vt[..., :, None] * fk[..., None, :]
            z = g * z + (1 - g) * fk
        elif rule == "delta":
            if spec.get("key_norm", "sum") == "l2":  # DeltaNet (Yang et al. 2024): L2-normalised q, k
                fq, fk = l2norm(fq) * m ** -0.5, l2norm(fk)
            else:
                fq = fq / (fq.sum(-1, keepdim=True) + 1e-6)  # sum normalization
                fk = fk / (fk.sum(-1, keepdim=True) + 1e-6)
            beta = torch.sigmoid(linear(x[:, t], W, p + "gate.")).reshape(B, H, 1)
            v_old = torch.einsum("bhdm,bhm->bhd", S, fk)
            S = S + (beta * (vt - v_old))[..., :, None] * fk[..., None, :]
            z = z + fk
        elif rule == "gated_delta":
            # Gated DeltaNet (Yang, Kautz & Hatamizadeh 2024), as in flash-linear-attention:
            # S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T
            fq, fk = l2norm(fq) * m ** -0.5, l2norm(fk)
            beta = torch.sigmoid(x[:, t] @ W[p + "b_proj.weight"].T).reshape(B, H, 1)
            dt = F.softplus(x[:, t] @ W[p + "a_proj.weight"].T + W[p + "dt_bias"])
            alpha = torch.exp(-torch.exp(W[p + "A_log"]) * dt).reshape(B, H, 1, 1)
            S = alpha * S
            u = beta * (vt - torch.einsum("bhdm,bhm->bhd", S, fk))
            S = S + u[..., :, None] * fk[..., None, :]
        elif rule == "decay":
            zg = torch.sigmoid(linear(x[:, t], W, p + "decay_z.")).reshape(B, H, hd)
            fg = torch.sigmoid(linear(x[:, t], W, p + "decay_f.")).reshape(B, H, m)
            S = zg[..., :, None] * S * fg[..., None, :] + vt[..., :, None] * fk[..., None, :]
        y = torch.einsum("bhdm,bhm->bhd", S, fq)  # read after write
        if attn:
            y = y / (z * fq).sum(-1, keepdim=True).clamp(min=1e-2)
        out[:, t] = y
    return linear(out.reshape(B, T, H * hd), W, p + "o.")


def logits_of(cfg, W, idx):
    B, T = idx.shape
    x = W["wte.weight"][idx] + W["wpe.weight"][torch.arange(T)]
    d = cfg["d_model"]
    for i, spec in enumerate(cfg["layers"]):
        p = f"blocks.{i}."
        h = F.layer_norm(x, (d,), W[p + "ln1.weight"], W[p + "ln1.bias"], 1e-5)
        kind = spec["kind"]
        if kind in ("softmax", "local"):
            mixed = softmax_attention(h, W, p + "mixer.", cfg, spec.get("window", 0) if kind == "local" else 0)
        elif kind == "fast_weight":
            mixed = fast_weight(h, W, p + "mixer.", cfg, spec)
        else:
            raise SystemExit(f"check_logits.py: mixer {kind} not implemented here")
        x = x + mixed
        h = F.layer_norm(x, (d,), W[p + "ln2.weight"], W[p + "ln2.bias"], 1e-5)
        x = x + linear(F.gelu(linear(h, W, p + "fc."), approximate="tanh"), W, p + "proj.")
    x = F.layer_norm(x, (d,), W["ln_f.weight"], W["ln_f.bias"], 1e-5)
    return x @ W["wte.weight"].T


def main(argv):
    tol = 1e-9
    if "--tol" in argv:
        i = argv.index("--tol")
        tol = float(argv[i + 1])
        del argv[i:i + 2]
    if not argv or len(argv) % 2:
        raise SystemExit(__doc__)
    worst_ok = True
    for model_path, io_path in zip(argv[::2], argv[1::2]):
        meta, W = read_safetensors(model_path)
        cfg = json.loads(meta["fwlab.model_config"])
        _, io = read_safetensors(io_path)
        with torch.no_grad():
            ours = logits_of(cfg, W, io["input_ids"])
        diff = (ours - io["logits"]).abs().max().item()
        kinds = ",".join(l["kind"] if l["kind"] != "fast_weight" else l["rule"] for l in cfg["layers"])
        ok = diff <= tol
        worst_ok &= ok
        print(f"{'ok' if ok else 'MISMATCH'} {model_path} [{kinds}] max|logits diff| = {diff:.3e} (tol {tol:g})")
    return 0 if worst_ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/python3
"""An independent Llama / Mistral / Qwen2 in Hugging Face's exact layout, for cross-checking fwlab's importer.

Written from the semantics of transformers' LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM
(modeling_llama.py, modeling_mistral.py, modeling_qwen2.py, modeling_rope_utils.py); it shares no code with fwlab.

Usage:
  hf_llama.py write DIR [--arch llama|mistral|qwen2] [--vocab V] [--hidden D] [--intermediate I] [--layers L]
                        [--heads H] [--kv-heads K] [--head-dim HD] [--positions P] [--rope-theta T]
                        [--rope-scaling none|linear|llama3] [--rope-factor F] [--rope-original N]
                        [--rope-low-freq-factor A] [--rope-high-freq-factor B] [--legacy-rope-key]
                        [--sliding-window W] [--attention-bias] [--tie] [--shards N] [--dtype F32|BF16|F16]
                        [--seed S] [--expected] [--generate N] [--prompt-len N]
      Writes config.json as Hugging Face writes it for the architecture, random weights under HF's tensor names
      (one model.safetensors, or N shards model-0000i-of-0000N.safetensors plus model.safetensors.index.json).
      With --expected also DIR/expected.json: {"prompt": [...], "logits": [[...] per prompt position],
      "greedy": [...]}, all computed in float64 from the weights as stored (dtype-rounded); greedy runs a full
      forward per step (no cache) and never stops at eos.
  hf_llama.py selftest
      Checks of this reference against itself; prints "selftest: N checks passed", exits 1 on any failure:
      (1) GQA == MHA with repeated kv weights, (2) RoPE relative-position property, complex-rotation form,
      linear = positions / factor, (3) llama3 inv_freq against the hand-written closed form, (4) safetensors
      write/read round trip per dtype and sharding, (5) sliding-window mask, (6) tied / untied lm_head,
      (7) layout, causality, non-degenerate logits, (8) forward() against a per-position per-head scalar loop.
"""
import argparse
import json
import math
import os
import struct
import sys
import tempfile

import torch

# safetensors dtype names. bf16 is written/read through its raw int16 bits (numpy has no bfloat16).
DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16, "F64": torch.float64}
NAMES = {v: k for k, v in DTYPES.items()}
TORCH_DTYPE_NAMES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}
ARCHS = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM"}


# ----------------------------------------------------------------------------------------------- safetensors
def tensor_bytes(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)  # same bits, a dtype numpy knows
    return t.numpy().tobytes() if t.numel() else b""


def write_safetensors(path, tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        raw = tensor_bytes(t)
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)  # the safetensors writer pads the header to 8 bytes with spaces
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
        dt = DTYPES[e["dtype"]]
        raw = bytearray(data[8 + n + b:8 + n + end])
        if dt == torch.bfloat16:
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16) if raw else torch.empty(0, dtype=dt)
        else:
            t = torch.frombuffer(raw, dtype=dt) if raw else torch.empty(0, dtype=dt)
        out[name] = t.reshape(e["shape"])
    return out


def shard_files(n):
    return ["model.safetensors"] if n == 1 else [f"model-{s + 1:05d}-of-{n:05d}.safetensors" for s in range(n)]


def save_weights(dirname, W, shards):
    """One model.safetensors, or `shards` files in state-dict order with HF's index (weight_map + total_size)."""
    names = list(W)
    if shards == 1:
        write_safetensors(os.path.join(dirname, "model.safetensors"), W, {"format": "pt"})
        return
    per = math.ceil(len(names) / shards)
    weight_map, total = {}, 0
    for s, file in enumerate(shard_files(shards)):
        part = {n: W[n] for n in names[s * per:(s + 1) * per]}
        write_safetensors(os.path.join(dirname, file), part, {"format": "pt"})
        for n, t in part.items():
            weight_map[n] = file
            total += t.numel() * t.element_size()
    with open(os.path.join(dirname, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2, sort_keys=True)


def load_model(dirname):
    """config.json and every tensor, from model.safetensors or from the shards the index names."""
    with open(os.path.join(dirname, "config.json")) as f:
        cfg = json.load(f)
    index = os.path.join(dirname, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    W = {}
    for file in files:
        W.update(read_safetensors(os.path.join(dirname, file)))
    return cfg, W


# ------------------------------------------------------------------------------------------------- config
def rope_scaling_dict(args):
    """The rope_scaling entry as HF configs hold it (null when none). Newer transformers write "rope_type"; files
    saved before 4.43 have "type" (--legacy-rope-key); transformers reads either."""
    if args.rope_scaling == "none":
        return None
    key = "type" if args.legacy_rope_key else "rope_type"
    if args.rope_scaling == "linear":
        return {"factor": float(args.rope_factor), key: "linear"}
    return {"factor": float(args.rope_factor), "high_freq_factor": float(args.rope_high_freq_factor),
            "low_freq_factor": float(args.rope_low_freq_factor),
            "original_max_position_embeddings": int(args.rope_original), key: "llama3"}


def make_config(args):
    """config.json with the keys that save_pretrained writes for each architecture (written with sorted keys,
    as PretrainedConfig.to_json_string does)."""
    arch = args.arch
    if args.heads % args.kv_heads:
        raise SystemExit("--heads must be a multiple of --kv-heads")
    if arch != "mistral" and args.sliding_window is not None:
        raise SystemExit("--sliding-window is for --arch mistral")
    if arch == "mistral" and args.rope_scaling != "none":
        raise SystemExit("MistralConfig has no rope_scaling")  # it is not a MistralConfig field
    if arch != "llama" and args.attention_bias:
        raise SystemExit("--attention-bias is a LlamaConfig field (qwen2 has fixed q/k/v biases)")
    head_dim = args.head_dim or args.hidden // args.heads
    cfg = {"architectures": [ARCHS[arch]], "attention_dropout": 0.0}
    if arch == "llama":
        cfg["attention_bias"] = bool(args.attention_bias)
    # Llama 2 / Mistral tokenizers: bos 1, eos 2. Qwen2 uses <|endoftext|> for both (here the last id).
    bos, eos = (args.vocab - 1, args.vocab - 1) if arch == "qwen2" else (1, 2)
    cfg.update({"bos_token_id": bos, "eos_token_id": eos})
    # head_dim is a LlamaConfig/MistralConfig field (written always); Qwen2Config only has it when it is set.
    if arch != "qwen2" or args.head_dim:
        cfg["head_dim"] = head_dim
    cfg.update({"hidden_act": "silu", "hidden_size": args.hidden, "initializer_range": 0.02,
                "intermediate_size": args.intermediate, "max_position_embeddings": args.positions})
    if arch == "qwen2":
        cfg["max_window_layers"] = args.layers
    if arch == "llama":
        cfg["mlp_bias"] = False
    cfg.update({"model_type": arch, "num_attention_heads": args.heads, "num_hidden_layers": args.layers,
                "num_key_value_heads": args.kv_heads})
    if arch == "llama":
        cfg["pretraining_tp"] = 1
    cfg["rms_norm_eps"] = 1e-6 if arch == "qwen2" else 1e-5  # the values the published checkpoints carry
    if arch != "mistral":
        cfg["rope_scaling"] = rope_scaling_dict(args)
    cfg["rope_theta"] = float(args.rope_theta if args.rope_theta is not None else
                              (1000000.0 if arch == "qwen2" else 10000.0))
    if arch == "mistral":
        cfg["sliding_window"] = args.sliding_window  # null: no window (Mistral v0.2 and later)
    if arch == "qwen2":
        # As in the published Qwen2 files: a sliding_window value that is unused because use_sliding_window is
        # false. An importer must ignore it.
        cfg["sliding_window"] = args.positions
    cfg.update({"tie_word_embeddings": bool(args.tie), "torch_dtype": TORCH_DTYPE_NAMES[args.dtype],
                "transformers_version": "4.46.0", "use_cache": True})
    if arch == "qwen2":
        cfg["use_sliding_window"] = False
    cfg["vocab_size"] = args.vocab
    return cfg


def head_dim_of(cfg):
    # transformers: getattr(config, "head_dim", None) or hidden_size // num_attention_heads
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def biased_projections(cfg):
    """Which attention projections have a bias. Qwen2Attention: q/k/v always (bias=True), o never.
    LlamaAttention: all four iff attention_bias. Mistral: none."""
    if cfg["model_type"] == "qwen2":
        return ("q_proj", "k_proj", "v_proj")
    if cfg.get("attention_bias"):
        return ("q_proj", "k_proj", "v_proj", "o_proj")
    return ()


def sliding_window_of(cfg):
    """Mistral: config.sliding_window on every layer. Qwen2: only with use_sliding_window (never written here)."""
    if cfg["model_type"] == "mistral":
        return cfg.get("sliding_window")
    if cfg["model_type"] == "qwen2" and cfg.get("use_sliding_window"):
        raise NotImplementedError("qwen2 use_sliding_window (layers >= max_window_layers) is not modelled")
    return None


# ------------------------------------------------------------------------------------------------ weights
def weight_shapes(cfg):
    """HF's state-dict names and shapes, in state-dict order; nn.Linear weights are [out, in]."""
    D, V, I = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
    hd, H, K = head_dim_of(cfg), cfg["num_attention_heads"], cfg["num_key_value_heads"]
    out_dims = {"q_proj": H * hd, "k_proj": K * hd, "v_proj": K * hd, "o_proj": D}
    in_dims = {"q_proj": D, "k_proj": D, "v_proj": D, "o_proj": H * hd}
    biased = biased_projections(cfg)
    S = {"model.embed_tokens.weight": ((V, D), "embed")}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            S[p + f"self_attn.{proj}.weight"] = ((out_dims[proj], in_dims[proj]), proj)
            if proj in biased:
                S[p + f"self_attn.{proj}.bias"] = ((out_dims[proj],), "bias")
        S[p + "mlp.gate_proj.weight"] = ((I, D), "gate_proj")
        S[p + "mlp.up_proj.weight"] = ((I, D), "up_proj")
        S[p + "mlp.down_proj.weight"] = ((D, I), "down_proj")
        S[p + "input_layernorm.weight"] = ((D,), "norm")
        S[p + "post_attention_layernorm.weight"] = ((D,), "norm")
    S["model.norm.weight"] = ((D,), "norm")
    if not cfg["tie_word_embeddings"]:
        S["lm_head.weight"] = ((V, D), "embed")  # tied models save no lm_head.weight
    return S


# Scale per kind, times 1/sqrt(fan_in) for projections: q/k at gain 1 give attention scores of order 1 (not a
# uniform softmax); embeddings at 0.3 give logits of std ~0.3*sqrt(D). o_proj/down_proj at gain 3 let the blocks
# outweigh the token's own embedding in the residual, else a tied model greedily repeats its last token forever.
# HF's own init (std 0.02) would make every logit ~0 and the greedy path a matter of rounding, so it is not used.
GAINS = {"q_proj": 1.0, "k_proj": 1.0, "v_proj": 0.7, "o_proj": 3.0, "gate_proj": 1.0, "up_proj": 1.0,
         "down_proj": 3.0}


def random_weights(cfg, seed, dtype):
    g = torch.Generator().manual_seed(seed)
    W = {}
    for name, (shape, kind) in weight_shapes(cfg).items():
        z = torch.randn(*shape, generator=g, dtype=torch.float64)
        if kind == "embed":
            t = 0.3 * z
        elif kind == "norm":
            t = 1.0 + 0.1 * z
        elif kind == "bias":
            t = 0.1 * z
        else:
            t = GAINS[kind] / math.sqrt(shape[1]) * z
        W[name] = t.to(dtype)
    return W


# ------------------------------------------------------------------------------------------------- model
def default_inv_freq(theta, dim):
    # _compute_default_rope_parameters: 1 / theta^(2i/dim), i = 0..dim/2-1 (HF: float32; here float64)
    return 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))


def llama3_inv_freq(inv_freq, factor, low_freq_factor, high_freq_factor, old_context_len):
    """_compute_llama3_parameters: by wavelength 2*pi/inv_freq. Shorter than old_ctx/high_freq_factor: kept;
    longer than old_ctx/low_freq_factor: divided by factor; between (bounds included): blended with
    s = (old_ctx/wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor) as
    (1 - s) * inv_freq / factor + s * inv_freq."""
    wavelen = 2 * math.pi / inv_freq
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    out = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * out / factor + smooth * out
    medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    return torch.where(medium, smoothed, out)


def rope_type_of(rs):
    return None if rs is None else rs.get("rope_type", rs.get("type"))  # "type": the key before 4.43


def inv_freq_of(cfg):
    """RoPE inverse frequencies over head_dim (transformers >= 4.46 reads head_dim here; see the report)."""
    inv = default_inv_freq(cfg["rope_theta"], head_dim_of(cfg))
    rs = cfg.get("rope_scaling")
    kind = rope_type_of(rs)
    if kind in (None, "default"):
        return inv
    if kind == "linear":
        return inv / rs["factor"]  # HF scales inv_freq; same as dividing the positions by factor (selftest)
    if kind == "llama3":
        return llama3_inv_freq(inv, rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"],
                               rs["original_max_position_embeddings"])
    raise NotImplementedError(f"rope_type {kind}")


def rope_cos_sin(inv_freq, positions):
    # LlamaRotaryEmbedding: freqs = pos * inv_freq; emb = cat(freqs, freqs) -- both halves share a frequency.
    freqs = torch.outer(positions.to(torch.float64), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()  # attention_scaling is 1.0 for default, linear and llama3


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def apply_rope(x, cos, sin):
    # apply_rotary_pos_emb: x * cos + rotate_half(x) * sin; element i pairs with i + head_dim/2 (not 2i, 2i+1)
    return x * cos + rotate_half(x) * sin


def rms_norm(x, w, eps):
    # LlamaRMSNorm: in float32 (or wider), x * rsqrt(mean(x^2) + eps), cast back, then weight * x
    xf = x.to(torch.float32) if x.dtype in (torch.float16, torch.bfloat16) else x
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return w * y.to(x.dtype)


def repeat_kv(x, n_rep):
    # repeat_kv: [B, K, T, hd] -> [B, K*n_rep, T, hd]; kv head j serves query heads j*n_rep .. j*n_rep+n_rep-1
    B, K, T, hd = x.shape
    return x[:, :, None].expand(B, K, n_rep, T, hd).reshape(B, K * n_rep, T, hd)


def allowed_keys(T, window=None):
    """[T, T] bool, True where query i may see key j: causal, and with a window only the last `window` keys
    including itself (masking_utils' sliding_window_overlay: kv_idx > q_idx - sliding_window)."""
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    ok = j <= i
    if window is not None:
        ok &= j > i - window
    return ok


def attention(x, W, p, cfg, cos, sin, allowed, biased):
    B, T, _ = x.shape
    H, K, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], head_dim_of(cfg)

    def proj(name):
        y = x @ W[p + name + ".weight"].T
        return y + W[p + name + ".bias"] if name in biased else y  # KeyError if a bias the config implies is absent

    q = proj("q_proj").view(B, T, H, hd).transpose(1, 2)
    k = proj("k_proj").view(B, T, K, hd).transpose(1, 2)
    v = proj("v_proj").view(B, T, K, hd).transpose(1, 2)
    q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    k, v = repeat_kv(k, H // K), repeat_kv(v, H // K)
    s = (q @ k.transpose(-1, -2)) * hd ** -0.5  # scaling = head_dim**-0.5, whatever hidden_size/heads is
    s = s.masked_fill(~allowed, float("-inf"))
    y = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, H * hd)
    o = y @ W[p + "o_proj.weight"].T
    return o + W[p + "o_proj.bias"] if "o_proj" in biased else o


def mlp(x, W, p):
    # LlamaMLP: down(act(gate(x)) * up(x)), hidden_act "silu"
    return (torch.nn.functional.silu(x @ W[p + "gate_proj.weight"].T) * (x @ W[p + "up_proj.weight"].T)) \
        @ W[p + "down_proj.weight"].T


def forward(W, cfg, ids, window="config"):
    """Logits [B, T, V] of a full forward from position 0 (no cache). Computes in W's dtype (callers pass
    float64). `window` overrides the config's sliding window (selftest)."""
    eps, biased = cfg["rms_norm_eps"], biased_projections(cfg)
    window = sliding_window_of(cfg) if window == "config" else window
    T = ids.shape[1]
    cos, sin = rope_cos_sin(inv_freq_of(cfg), torch.arange(T))
    cos, sin = cos.to(W["model.norm.weight"].dtype), sin.to(W["model.norm.weight"].dtype)
    allowed = allowed_keys(T, window)
    x = W["model.embed_tokens.weight"][ids]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        x = x + attention(rms_norm(x, W[p + "input_layernorm.weight"], eps), W, p + "self_attn.", cfg, cos, sin,
                          allowed, biased)
        x = x + mlp(rms_norm(x, W[p + "post_attention_layernorm.weight"], eps), W, p + "mlp.")
    x = rms_norm(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else W["lm_head.weight"]
    return x @ head.T


def to_f64(W):
    return {n: t.to(torch.float64) for n, t in W.items()}


def greedy(Wf, cfg, prompt, n):
    """Greedy decoding, a full float64 forward per step (no cache); returns the new ids and the smallest
    top-1 minus top-2 logit margin seen (a near tie would make the expected ids fragile)."""
    ids, margin = prompt.clone(), float("inf")
    for _ in range(n):
        last = forward(Wf, cfg, ids)[0, -1]
        top = torch.topk(last, 2).values
        margin = min(margin, (top[0] - top[1]).item())
        ids = torch.cat([ids, last.argmax().view(1, 1)], dim=1)
    return ids[0, prompt.shape[1]:].tolist(), margin


# ------------------------------------------------------------------------------------------------- write
def write_model(args):
    """config.json + weights (+ expected.json); returns (cfg, W) with W in the stored dtype."""
    os.makedirs(args.dir, exist_ok=True)
    cfg = make_config(args)
    with open(os.path.join(args.dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)  # PretrainedConfig.to_json_string sorts the keys
    W = random_weights(cfg, args.seed, DTYPES[args.dtype])
    save_weights(args.dir, W, args.shards)
    return cfg, W


def write(args):
    cfg, W = write_model(args)
    summary = f"wrote {args.dir}: {cfg['architectures'][0]}, {len(W)} tensors, {args.dtype}, {args.shards} file(s)"
    if args.expected:
        if (len(args.prompt_ids.split(",")) if args.prompt_ids else args.prompt_len) + args.generate > args.positions:
            raise SystemExit("--prompt-len + --generate exceeds --positions")
        Wf = to_f64(W)  # the stored (dtype-rounded) values, computed on in float64
        g = torch.Generator().manual_seed(args.seed + 1)
        prompt = torch.randint(0, args.vocab, (1, args.prompt_len), generator=g)
        if args.prompt_ids:  # a prompt given as ids (a tokenizer's encoding of a text)
            prompt = torch.tensor([[int(i) for i in args.prompt_ids.split(",")]])
        with torch.no_grad():
            logits = forward(Wf, cfg, prompt)[0]
            ids, margin = greedy(Wf, cfg, prompt, args.generate)
        with open(os.path.join(args.dir, "expected.json"), "w") as f:
            json.dump({"prompt": prompt[0].tolist(), "logits": logits.to(torch.float32).tolist(), "greedy": ids}, f)
        summary += f"; logits std {logits.std().item():.3f}; greedy {ids} (smallest top-2 margin {margin:.4f})"
        if margin < 1e-3:
            summary += "\nWARNING: a near tie in the greedy path; an fp32 implementation may pick the other id"
    print(summary)


# ----------------------------------------------------------------------------------------------- selftest
class Checks:
    def __init__(self):
        self.passed, self.failed = 0, []

    def __call__(self, name, ok, detail=""):
        if ok:
            self.passed += 1
        else:
            self.failed.append(name)
            print(f"FAIL {name} {detail}")


def cli(argv):
    return finish(parser().parse_args(argv))


def small(arch="llama", *extra):
    """A config and float64 weights for in-memory checks."""
    args = cli(["write", "-", "--arch", arch, "--vocab", "50", "--hidden", "32", "--intermediate", "40",
                "--layers", "2", "--heads", "4", "--positions", "64", *extra])
    cfg = make_config(args)
    return cfg, random_weights(cfg, 7, torch.float64)


def check_gqa(c):
    """(1) K kv heads == MHA with each kv head's weights (and biases) repeated for the n_rep query heads it serves
    (repeat_interleave, not tiling); with head_dim 12 != hidden/heads = 8."""
    ids = torch.randint(0, 50, (2, 11), generator=torch.Generator().manual_seed(3))
    for arch in ("llama", "qwen2"):
        cfg, W = small(arch, "--kv-heads", "2", "--head-dim", "12")
        mha = dict(cfg, num_key_value_heads=cfg["num_attention_heads"])
        Wm = dict(W)
        n_rep, hd = cfg["num_attention_heads"] // cfg["num_key_value_heads"], 12
        for n in W:
            if ".k_proj." in n or ".v_proj." in n:
                t = W[n].view(cfg["num_key_value_heads"], hd, *W[n].shape[1:])
                Wm[n] = t.repeat_interleave(n_rep, dim=0).reshape(-1, *W[n].shape[1:])
        d = (forward(W, cfg, ids) - forward(Wm, mha, ids)).abs().max().item()
        c(f"gqa {arch}", d < 1e-12, f"max diff {d}")
        Wt = dict(Wm)  # tiling the kv heads instead must differ, or the check above could not fail
        for n in W:
            if ".k_proj." in n or ".v_proj." in n:
                t = W[n].view(cfg["num_key_value_heads"], hd, *W[n].shape[1:])
                Wt[n] = t.repeat(n_rep, *([1] * (t.dim() - 1))).reshape(-1, *W[n].shape[1:])
        d = (forward(W, cfg, ids) - forward(Wt, mha, ids)).abs().max().item()
        c(f"gqa {arch} grouping matters", d > 1e-6, f"max diff {d}")


def check_rope(c):
    """(2) q.k after rotating q by m and k by n depends only on m - n; the rotation is the complex product of
    (x_i + i x_{i+hd/2}) with e^{i m inv_freq_i}; linear scaling equals positions divided by factor."""
    g = torch.Generator().manual_seed(5)
    hd = 16
    q, k = torch.randn(hd, generator=g, dtype=torch.float64), torch.randn(hd, generator=g, dtype=torch.float64)
    for name, inv in (("default", default_inv_freq(10000.0, hd)),
                      ("llama3", llama3_inv_freq(default_inv_freq(10000.0, hd), 8.0, 1.0, 4.0, 32))):
        def dot(m, n):
            cm, sm = rope_cos_sin(inv, torch.tensor([m]))
            cn, sn = rope_cos_sin(inv, torch.tensor([n]))
            return (apply_rope(q, cm[0], sm[0]) @ apply_rope(k, cn[0], sn[0])).item()
        for delta in (0, 1, 5, 37):
            vals = [dot(m + delta, m) for m in (0, 3, 20, 100, 1000)]
            c(f"rope {name} relative delta={delta}", max(vals) - min(vals) < 1e-9, str(vals))
        c(f"rope {name} position matters", abs(dot(5, 0) - dot(0, 0)) > 1e-3)
        m = 13
        cm, sm = rope_cos_sin(inv, torch.tensor([m]))
        z = torch.complex(q[:hd // 2], q[hd // 2:]) * torch.polar(torch.ones(hd // 2, dtype=torch.float64), m * inv)
        d = (apply_rope(q, cm[0], sm[0]) - torch.cat([z.real, z.imag])).abs().max().item()
        c(f"rope {name} = complex rotation of (i, i+hd/2) pairs", d < 1e-12, f"max diff {d}")
    cfg, _ = small("llama", "--rope-scaling", "linear", "--rope-factor", "2.5")
    pos = torch.arange(9, dtype=torch.float64)
    c1, s1 = rope_cos_sin(inv_freq_of(cfg), pos)
    c2, s2 = rope_cos_sin(default_inv_freq(cfg["rope_theta"], head_dim_of(cfg)), pos / 2.5)
    d = max((c1 - c2).abs().max().item(), (s1 - s2).abs().max().item())
    c("rope linear = positions / factor", d < 1e-12, f"max diff {d}")


def check_llama3(c):
    """(3) llama3 inv_freq, head_dim 16, theta 1e4, factor 8, low 1, high 4, original 32 (wavelengths 6.28, 19.9,
    62.8, ...: bounds 8 and 32): index 0 kept, index 1 blended, indices 2.. divided by 8; checked against the
    closed form written out by hand, plus monotonicity and continuity of the blend at both bounds."""
    inv = default_inv_freq(10000.0, 16)
    new = llama3_inv_freq(inv, 8.0, 1.0, 4.0, 32)
    c("llama3 index 0 kept", abs(new[0].item() - 1.0) < 1e-15, str(new[0].item()))
    theta1 = 10000.0 ** (-2 / 16)
    s = (32 / (2 * math.pi / theta1) - 1.0) / (4.0 - 1.0)
    expect1 = theta1 * ((1 - s) / 8 + s)
    c("llama3 index 1 blended", 0 < s < 1 and abs(new[1].item() - expect1) < 1e-15, f"{new[1].item()} vs {expect1}")
    for i in range(2, 8):
        c(f"llama3 index {i} divided", abs(new[i].item() - 10000.0 ** (-2 * i / 16) / 8) < 1e-15)
    c("llama3 decreasing", bool((new[1:] < new[:-1]).all()))
    # the blend is continuous: at wavelen = old/high it gives inv_freq, at wavelen = old/low inv_freq / factor
    edge = torch.tensor([2 * math.pi / 8, 2 * math.pi / 32], dtype=torch.float64)
    e = llama3_inv_freq(edge, 8.0, 1.0, 4.0, 32)
    c("llama3 blend continuous at the bounds", (e - torch.tensor([edge[0], edge[1] / 8])).abs().max().item() < 1e-15,
      str(e.tolist()))
    cfg, _ = small("llama", "--rope-scaling", "llama3", "--rope-factor", "8", "--rope-original", "32",
                   "--head-dim", "16")
    c("llama3 from config", torch.equal(inv_freq_of(cfg), new))


def check_round_trip(c):
    """(4) write -> read of every dtype, one file and three shards: identical bits, the index covers every
    tensor with the right file and total_size, and the config read back is the one written."""
    for dtype in ("F32", "BF16", "F16"):
        for shards in (1, 3):
            with tempfile.TemporaryDirectory() as d:
                args = cli(["write", d, "--arch", "qwen2", "--vocab", "40", "--hidden", "16", "--intermediate",
                            "24", "--layers", "2", "--heads", "4", "--kv-heads", "2", "--dtype", dtype,
                            "--shards", str(shards)])
                cfg, W = write_model(args)
                cfg2, W2 = load_model(d)
                same = set(W) == set(W2) and all(W2[n].dtype == W[n].dtype and W2[n].shape == W[n].shape and
                                                 tensor_bytes(W2[n]) == tensor_bytes(W[n]) for n in W)
                c(f"round trip {dtype} x{shards}", same and cfg2 == cfg)
                files = sorted(os.listdir(d))
                if shards == 1:
                    c(f"single file {dtype}", files == ["config.json", "model.safetensors"], str(files))
                    continue
                with open(os.path.join(d, "model.safetensors.index.json")) as f:
                    index = json.load(f)
                total = sum(t.numel() * t.element_size() for t in W.values())
                in_files = all(n in read_safetensors(os.path.join(d, file)) for n, file in index["weight_map"].items())
                c(f"index {dtype} x{shards}", set(index["weight_map"]) == set(W) and in_files and
                  index["metadata"]["total_size"] == total and
                  sorted(set(index["weight_map"].values())) == shard_files(shards))
    # bf16 bits: round-to-nearest-even of the float64 values, as torch's .to(bfloat16) does from float32
    x = torch.tensor([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, -2.5], dtype=torch.float64)
    c("bf16 rounding", x.to(torch.bfloat16).to(torch.float64).tolist() == [1.0, 1.0 + 2 ** -6, -2.5])


def check_sliding_window(c):
    """(5) a window >= T is the plain causal mask, and gives the same logits as no window; a small window keeps
    exactly min(i+1, W) keys per row and changes the logits."""
    T = 10
    c("window >= T is causal", all(torch.equal(allowed_keys(T, w), allowed_keys(T)) for w in (T, T + 1, 4096)))
    counts = allowed_keys(T, 3).sum(1).tolist()
    c("window 3 keeps 3 keys incl. self", counts == [min(i + 1, 3) for i in range(T)], str(counts))
    cfg, W = small("mistral", "--sliding-window", str(T))
    ids = torch.randint(0, 50, (1, T), generator=torch.Generator().manual_seed(4))
    d = (forward(W, cfg, ids) - forward(W, cfg, ids, window=None)).abs().max().item()
    c("mistral window = T same logits", d == 0.0, f"max diff {d}")
    small_w = forward(W, cfg, ids, window=3)
    full = forward(W, cfg, ids, window=None)
    c("mistral window 3 same first 3 positions", (small_w[:, :3] - full[:, :3]).abs().max().item() == 0.0)
    c("mistral window 3 changes later logits", (small_w[:, 3:] - full[:, 3:]).abs().max().item() > 1e-4)
    cfg3, _ = small("mistral", "--sliding-window", "3")
    c("mistral config window read", torch.equal(forward(W, cfg3, ids), small_w))


def check_tied(c):
    """(6) tied: no lm_head.weight in the files and the output uses embed_tokens; untied: lm_head.weight [V, D]
    is written and used."""
    with tempfile.TemporaryDirectory() as d:
        tied = cli(["write", d, "--arch", "qwen2", "--vocab", "40", "--hidden", "16", "--intermediate", "24",
                    "--layers", "1", "--heads", "2", "--tie", "--shards", "2"])
        cfg, W = write_model(tied)
        _, W2 = load_model(d)
        c("tied writes no lm_head.weight", "lm_head.weight" not in W2 and cfg["tie_word_embeddings"] is True)
        ids = torch.arange(7).view(1, 7)
        Wf = to_f64(W2)
        explicit = dict(Wf, **{"lm_head.weight": Wf["model.embed_tokens.weight"]})
        d1 = (forward(Wf, cfg, ids) - forward(explicit, dict(cfg, tie_word_embeddings=False), ids)).abs().max().item()
        c("tied uses embed_tokens", d1 == 0.0, f"max diff {d1}")
    with tempfile.TemporaryDirectory() as d:
        untied = cli(["write", d, "--arch", "llama", "--vocab", "40", "--hidden", "16", "--intermediate", "24",
                      "--layers", "1", "--heads", "2"])
        cfg, _ = write_model(untied)
        _, W2 = load_model(d)
        ok = "lm_head.weight" in W2 and list(W2["lm_head.weight"].shape) == [40, 16]
        Wf = to_f64(W2)
        ids = torch.arange(7).view(1, 7)
        d2 = (forward(Wf, cfg, ids) - forward(Wf, dict(cfg, tie_word_embeddings=True), ids)).abs().max().item()
        c("untied writes and uses lm_head.weight", ok and not cfg["tie_word_embeddings"] and d2 > 1e-3)


def check_layout(c):
    """(7) extra: the names/shapes per arch (qwen2 q/k/v biases without o bias, llama attention_bias on all four,
    head_dim != hidden/heads), causality (a prefix's logits do not depend on later tokens), and a non-degenerate
    output (the greedy margin is not a rounding tie)."""
    cfg, W = small("qwen2", "--kv-heads", "2", "--head-dim", "12")
    c("qwen2 q/k/v biases, no o bias", all(f"model.layers.0.self_attn.{p}_proj.bias" in W for p in "qkv") and
      "model.layers.0.self_attn.o_proj.bias" not in W and "attention_bias" not in cfg)
    c("head_dim shapes", list(W["model.layers.0.self_attn.q_proj.weight"].shape) == [48, 32] and
      list(W["model.layers.0.self_attn.k_proj.weight"].shape) == [24, 32] and
      list(W["model.layers.0.self_attn.o_proj.weight"].shape) == [32, 48])
    cfg, W = small("llama", "--attention-bias")
    c("llama attention_bias on q/k/v/o", all(f"model.layers.1.self_attn.{p}_proj.bias" in W for p in "qkvo"))
    cfg, W = small("mistral")
    c("mistral no biases", not any(n.endswith(".bias") for n in W) and cfg["sliding_window"] is None)
    ids = torch.randint(0, 50, (1, 12), generator=torch.Generator().manual_seed(9))
    full = forward(W, cfg, ids)
    c("causal", (forward(W, cfg, ids[:, :7]) - full[:, :7]).abs().max().item() < 1e-12)
    c("logits not degenerate", full.std().item() > 0.5, str(full.std().item()))


def naive_logits(W, cfg, ids):
    """The same model written the slow way, for check (8): one position and one head at a time, RoPE as scalar
    2x2 rotations of (i, i + hd/2) with the llama3/linear rule applied per frequency in plain math, the kv head of
    query head h as h // (H/K), the window as a key list."""
    H, K, eps = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["rms_norm_eps"]
    hd, rs, win = head_dim_of(cfg), cfg.get("rope_scaling"), sliding_window_of(cfg)

    def freq(i):
        f = cfg["rope_theta"] ** (-2 * i / hd)
        if rope_type_of(rs) == "linear":
            return f / rs["factor"]
        if rope_type_of(rs) == "llama3":
            old, lo, hi, fac = (rs["original_max_position_embeddings"], rs["low_freq_factor"],
                                rs["high_freq_factor"], rs["factor"])
            wl = 2 * math.pi / f
            if wl < old / hi:
                return f
            if wl > old / lo:
                return f / fac
            s = (old / wl - lo) / (hi - lo)
            return (1 - s) * f / fac + s * f
        return f

    def rot(v, m):
        out = v.clone()
        for i in range(hd // 2):
            a, x, y = m * freq(i), v[i].item(), v[i + hd // 2].item()
            out[i], out[i + hd // 2] = x * math.cos(a) - y * math.sin(a), x * math.sin(a) + y * math.cos(a)
        return out

    def norm(x, w):
        return w * x / math.sqrt((x * x).mean().item() + eps)

    def lin(x, n):
        return W[n + ".weight"] @ x + (W[n + ".bias"] if n + ".bias" in W else 0)

    xs = [W["model.embed_tokens.weight"][t].clone() for t in ids]
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        hs = [norm(x, W[p + "input_layernorm.weight"]) for x in xs]
        qs, ks, vs = ([lin(h, p + f"self_attn.{n}_proj") for h in hs] for n in "qkv")
        out = []
        for i in range(len(xs)):
            heads = []
            for h in range(H):
                g = h // (H // K)
                keys = [j for j in range(i + 1) if win is None or i - j < win]
                q = rot(qs[i][h * hd:(h + 1) * hd], i)
                sc = torch.tensor([(q @ rot(ks[j][g * hd:(g + 1) * hd], j)).item() / math.sqrt(hd) for j in keys],
                                  dtype=torch.float64)
                pr = torch.softmax(sc, 0)
                heads.append(sum(pr[n] * vs[j][g * hd:(g + 1) * hd] for n, j in enumerate(keys)))
            out.append(xs[i] + lin(torch.cat(heads), p + "self_attn.o_proj"))
        xs = []
        for x in out:
            h = norm(x, W[p + "post_attention_layernorm.weight"])
            gate, up = lin(h, p + "mlp.gate_proj"), lin(h, p + "mlp.up_proj")
            xs.append(x + lin(gate / (1 + torch.exp(-gate)) * up, p + "mlp.down_proj"))
    head = W["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else W["lm_head.weight"]
    return torch.stack([head @ norm(x, W["model.norm.weight"]) for x in xs])


def check_naive(c):
    """(8) extra: forward() equals naive_logits() on a llama3 GQA model with head_dim != hidden/heads, a linear
    llama with attention_bias, a tied qwen2 and a windowed mistral."""
    ids = torch.randint(0, 50, (1, 9), generator=torch.Generator().manual_seed(11))
    for arch, extra in (("llama", ["--rope-scaling", "llama3", "--rope-factor", "8", "--rope-original", "16",
                                   "--kv-heads", "2", "--head-dim", "12"]),
                        ("llama", ["--rope-scaling", "linear", "--legacy-rope-key", "--attention-bias"]),
                        ("qwen2", ["--tie", "--kv-heads", "1"]),
                        ("mistral", ["--sliding-window", "3", "--kv-heads", "2"])):
        cfg, W = small(arch, *extra)
        d = (forward(W, cfg, ids)[0] - naive_logits(W, cfg, ids[0].tolist())).abs().max().item()
        c(f"naive {arch} {' '.join(extra)}", d < 1e-10, f"max diff {d}")


def selftest(_args):
    c = Checks()
    with torch.no_grad():
        for check in (check_gqa, check_rope, check_llama3, check_round_trip, check_sliding_window, check_tied,
                      check_layout, check_naive):
            check(c)
    if c.failed:
        print(f"selftest: {len(c.failed)} of {c.passed + len(c.failed)} checks failed")
        return 1
    print(f"selftest: {c.passed} checks passed")
    return 0


# ----------------------------------------------------------------------------------------------------- cli
def parser():
    p = argparse.ArgumentParser(description="Independent HF Llama/Mistral/Qwen2 reference")
    p.add_argument("command", choices=["write", "selftest"])
    p.add_argument("dir", nargs="?")
    p.add_argument("--arch", default="llama", choices=list(ARCHS))
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--intermediate", type=int, default=176)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=None, help="default: --heads")
    p.add_argument("--head-dim", type=int, default=None, help="default: hidden / heads")
    p.add_argument("--positions", type=int, default=64)
    p.add_argument("--rope-theta", type=float, default=None, help="default: 1e6 for qwen2, else 1e4")
    p.add_argument("--rope-scaling", default="none", choices=["none", "linear", "llama3"])
    p.add_argument("--rope-factor", type=float, default=4.0)
    p.add_argument("--rope-original", type=int, default=None,
                   help="llama3 original_max_position_embeddings, default positions / 2")
    p.add_argument("--rope-low-freq-factor", type=float, default=1.0)
    p.add_argument("--rope-high-freq-factor", type=float, default=4.0)
    p.add_argument("--legacy-rope-key", action="store_true", help='rope_scaling with "type" not "rope_type"')
    p.add_argument("--sliding-window", type=int, default=None)
    p.add_argument("--attention-bias", action="store_true", help="llama: biases on q, k, v and o")
    p.add_argument("--tie", action="store_true")
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--dtype", default="F32", choices=["F32", "BF16", "F16"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--expected", action="store_true")
    p.add_argument("--generate", type=int, default=8)
    p.add_argument("--prompt-len", type=int, default=8)
    p.add_argument("--prompt-ids", default="", help="comma-separated prompt ids instead of a random prompt")
    return p


def finish(args):
    """The defaults that depend on other arguments."""
    if args.kv_heads is None:
        args.kv_heads = args.heads
    if args.rope_original is None:
        args.rope_original = args.positions // 2
    return args


def main():
    args = finish(parser().parse_args())
    if args.command == "selftest":
        return selftest(args)
    if not args.dir:
        raise SystemExit("write needs DIR")
    write(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

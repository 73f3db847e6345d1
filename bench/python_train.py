#!/usr/bin/python3
"""The same softmax GPT training loop as fwlab-worker, in Python PyTorch, for a side-by-side throughput figure.

Prints the median tokens/s over logging intervals (the first interval, with warm-up, excluded), like the
worker's tokens_per_s metric. Usage: python_train.py BROWN_DIR STEPS BATCH SEQ THREADS
"""
import glob
import math
import random
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads, head_dim, layers, dropout):
        super().__init__()
        self.h, self.hd = heads, head_dim
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * heads * head_dim), nn.Linear(heads * head_dim, d)
        self.fc, self.proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.attn_drop, self.resid_drop, self.drop = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)
        for lin, std in ((self.qkv, 0.02), (self.o, 0.02 / math.sqrt(2 * layers)), (self.fc, 0.02), (self.proj, 0.02 / math.sqrt(2 * layers))):
            nn.init.normal_(lin.weight, 0, std)
            nn.init.zeros_(lin.bias)

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.h, self.hd).permute(2, 0, 3, 1, 4)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        y = self.attn_drop(torch.softmax(s, -1)) @ v
        x = x + self.resid_drop(self.o(y.transpose(1, 2).reshape(B, T, -1)))
        return x + self.drop(self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh")))


class GPT(nn.Module):
    def __init__(self, vocab=256, d=128, layers=4, heads=4, head_dim=32, context=256, dropout=0.1):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(context, d)
        nn.init.normal_(self.wte.weight, 0, 0.02)
        nn.init.normal_(self.wpe.weight, 0, 0.02)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(d, heads, head_dim, layers, dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, idx):
        x = self.drop(self.wte(idx) + self.wpe(torch.arange(idx.shape[1])))
        for b in self.blocks:
            x = b(x)
        return self.ln_f(x) @ self.wte.weight.T


def main(brown_dir, steps, batch, seq, threads):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    text = " ".join(w.rsplit("/", 1)[0] for f in sorted(glob.glob(brown_dir + "/c[a-r][0-9][0-9]")) for w in open(f).read().split())
    data = torch.tensor(list(text.encode()), dtype=torch.long)
    model = GPT(context=seq)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}], lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
    rng = random.Random(0)
    rates, t_interval, n_interval = [], time.perf_counter(), 0
    for step in range(steps):
        lr = 6e-4 * 0.5 * (1 + math.cos(math.pi * step / steps))
        for g in opt.param_groups:
            g["lr"] = lr
        starts = [rng.randrange(0, len(data) - seq - 1) for _ in range(batch)]
        w = torch.stack([data[s:s + seq + 1] for s in starts])
        loss = F.cross_entropy(model(w[:, :-1]).reshape(-1, 256), w[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        n_interval += 1
        if (step + 1) % 5 == 0:
            now = time.perf_counter()
            rates.append(n_interval * batch * seq / (now - t_interval))
            t_interval, n_interval = now, 0
    print(f"{statistics.median(rates[1:]):.1f}")


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], int(a[1]), int(a[2]), int(a[3]), int(a[4]))

#!/usr/bin/python3
"""torch's side of bench/gpt: trains the GPT bench/gpt trains with loopkit,
the same way, and says how fast.

The model is nanoGPT's GPT (model.py) as the gpt plugin computes it: pre-
LayerNorm blocks, causal self-attention (the non-flash path), a 4x MLP
with the tanh GELU, learned positions, ln_f, the head tied to
transformer.wte, no dropout. Its parameters are read from --init, a
safetensors file (nanoGPT's state_dict names; read here by hand, Debian
has no python3-safetensors), the one bench/gpt writes and the plugin
reads. The batches are the text plugin's: windows of --block + 1 bytes of
--text (gzip or not) at the positions of --positions (little-endian u32,
--batch per step, in order: bench/gpt draws them as the plugin does),
input the first --block bytes, targets shifted by one. AdamW(lr, betas,
weight_decay 0.01, eps 1e-8: torch's defaults and the adamw plugin's);
every step is optimizer.zero_grad(); loss = F.cross_entropy(model(x)...);
loss.backward(); optimizer.step().

--flush-denormal sets torch.set_flush_denormal(True) (torch at its best:
its kernels slow down on denormals); --autocast-bf16 runs the forward and
the loss under torch.autocast("cpu", bfloat16), torch's mixed precision.
The clock runs over steps --warmup .. --steps - 1 only. Prints one line:

    tokens_per_second R cpu_tokens_per_second C seconds S timed_steps N maxrss_kb M losses L1,L2,...

R over the wall clock, C over the process's CPU time (every thread's), M
its peak resident size, and the losses of the first --report steps.

Run with Debian's torch: /usr/bin/python3 bench/gpt_torch.py --init FILE
--text FILE --positions FILE --steps N [--warmup W] [--threads T]
"""
import argparse
import gzip
import json
import math
import resource
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class LayerNorm(nn.Module):
    def __init__(self, ndim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim))

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class Block(nn.Module):
    def __init__(self, C, H, T):
        super().__init__()
        self.ln_1 = LayerNorm(C)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(C, 3 * C)
        self.attn.c_proj = nn.Linear(C, C)
        self.ln_2 = LayerNorm(C)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(C, 4 * C)
        self.mlp.c_proj = nn.Linear(4 * C, C)
        self.n_head = H
        self.register_buffer("mask", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def attention(self, x):
        B, T, C = x.size()
        H = self.n_head
        q, k, v = self.attn.c_attn(x).split(C, dim=2)
        k = k.view(B, T, H, C // H).transpose(1, 2)
        q = q.view(B, T, H, C // H).transpose(1, 2)
        v = v.view(B, T, H, C // H).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.attn.c_proj(y)

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        h = F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh")
        return x + self.mlp.c_proj(h)


class GPT(nn.Module):
    def __init__(self, L, H, C, T, V):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(V, C),
            wpe=nn.Embedding(T, C),
            h=nn.ModuleList([Block(C, H, T) for _ in range(L)]),
            ln_f=LayerNorm(C),
        ))
        self.lm_head = nn.Linear(C, V, bias=False)
        self.transformer.wte.weight = self.lm_head.weight

    def forward(self, idx):
        T = idx.size(1)
        pos = torch.arange(0, T, dtype=torch.long)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def read_safetensors(path):
    """{name: float32 array} from a safetensors file (F32 tensors only)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            sys.exit("%s: %s is %s, expected F32" % (path, name, info["dtype"]))
        lo, hi = info["data_offsets"]
        a = np.frombuffer(data, dtype="<f4", count=(hi - lo) // 4, offset=base + lo)
        out[name] = a.reshape(info["shape"]).astype(np.float32)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--init", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--positions", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=12)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--n-embd", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--betas", default="0.9,0.99")
    ap.add_argument("--report", type=int, default=20)
    ap.add_argument("--flush-denormal", action="store_true",
                    help="torch.set_flush_denormal(True): torch at its best")
    ap.add_argument("--autocast-bf16", action="store_true",
                    help="forward and loss under torch.autocast('cpu', bfloat16)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.flush_denormal:
        torch.set_flush_denormal(True)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast_bf16)
    torch.manual_seed(0)

    opener = gzip.open if a.text.endswith(".gz") else open
    with opener(a.text, "rb") as f:
        text = np.frombuffer(f.read(), dtype=np.uint8).astype(np.int64)
    pos = np.fromfile(a.positions, dtype="<u4").astype(np.int64)
    B, T = a.batch, a.block
    if pos.size < a.steps * B:
        sys.exit("%s: %d positions, %d steps of %d need %d" %
                 (a.positions, pos.size, a.steps, B, a.steps * B))
    offsets = np.arange(T + 1)
    windows = torch.from_numpy(text[pos[:a.steps * B, None] + offsets[None, :]])
    xs = windows[:, :T].reshape(a.steps, B, T).contiguous()
    ys = windows[:, 1:].reshape(a.steps, B, T).contiguous()

    model = GPT(a.n_layer, a.n_head, a.n_embd, T, 256)
    init = read_safetensors(a.init)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name not in init:
                sys.exit("%s has no %s" % (a.init, name))
            p.copy_(torch.from_numpy(init[name]))
    betas = tuple(float(b) for b in a.betas.split(","))
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=betas)

    losses = []
    t0 = c0 = None
    for s in range(a.steps):
        if s == a.warmup:
            t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad()
        with autocast:
            logits = model(xs[s])
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), ys[s].view(-1))
        loss.backward()
        opt.step()
        if s < a.report:
            losses.append(loss.item())
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    timed = a.steps - a.warmup
    tokens = timed * B * T
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print("tokens_per_second %.6g cpu_tokens_per_second %.6g seconds %.6g "
          "timed_steps %d maxrss_kb %d losses %s" %
          (tokens / secs, tokens / cpu, secs, timed, rss,
           ",".join("%.9g" % v for v in losses)))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""torch's side of bench/lstm: trains the char-level LSTM language model
bench/lstm trains with loopkit, the same way, and says how fast.

The net is the sequential plugin's embedding(256, E) -> lstm(H) ->
linear(256): nn.Embedding, nn.LSTM(batch_first=True) (torch's fused CPU
kernels) and nn.Linear on every step, children named "0", "1" and "2" as
the plugin names its layers. Its parameters are read from --init, a
safetensors file (read here by hand, Debian has no python3-safetensors),
the one bench/lstm writes and the plugin reads. The batches are the text
plugin's: windows of --block + 1 bytes of --text (gzip or not) at the
positions of --positions (little-endian u32, --batch per step, in order:
bench/lstm draws them as the plugin does), input the first --block
bytes, targets shifted by one. Adam(lr; torch's defaults and the adam
plugin's otherwise); every step is optimizer.zero_grad(); loss =
F.cross_entropy over every position; loss.backward(); optimizer.step().

--flush-denormal sets torch.set_flush_denormal(True) (torch at its best:
its kernels slow down on denormals). The clock runs over steps --warmup ..
--steps - 1 only. Prints one line:

    tokens_per_second R cpu_tokens_per_second C seconds S timed_steps N maxrss_kb M losses L1,L2,...

R over the wall clock, C over the process's CPU time (every thread's), M
its peak resident size, and the losses of the first --report steps.

Run with Debian's torch: /usr/bin/python3 bench/lstm_torch.py --init FILE
--text FILE --positions FILE --steps N [--warmup W] [--threads T]
"""
import argparse
import gzip
import json
import resource
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class CharLSTM(nn.Module):
    def __init__(self, V, E, H):
        super().__init__()
        self.add_module("0", nn.Embedding(V, E))
        self.add_module("1", nn.LSTM(E, H, batch_first=True))
        self.add_module("2", nn.Linear(H, V))

    def forward(self, idx):
        h, _ = getattr(self, "1")(getattr(self, "0")(idx))
        return getattr(self, "2")(h)


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
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--embed", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--report", type=int, default=20)
    ap.add_argument("--flush-denormal", action="store_true",
                    help="torch.set_flush_denormal(True): torch at its best")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.flush_denormal:
        torch.set_flush_denormal(True)
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

    model = CharLSTM(256, a.embed, a.hidden)
    init = read_safetensors(a.init)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name not in init:
                sys.exit("%s has no %s" % (a.init, name))
            p.copy_(torch.from_numpy(init[name]))
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)

    losses = []
    t0 = c0 = None
    for s in range(a.steps):
        if s == a.warmup:
            t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad()
        logits = model(xs[s])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), ys[s].reshape(-1))
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

#!/usr/bin/python3
"""torch's side of bench/cnn: trains the CNN of examples/fashion-mnist-cnn.ini
the way bench/cnn trains it with loopkit, and says how fast.

    conv(1->32, 3x3, pad 1) - ReLU - maxpool 2 - conv(32->64, 3x3, pad 1) -
    ReLU - maxpool 2 - flatten - linear(3136->128) - ReLU - linear(128->10)

as torch.nn.Sequential, its parameters read from --init (a safetensors
file of its named_parameters(), read with the standard library and numpy:
the file bench/cnn writes and the sequential plugin's init option reads;
or raw little-endian f32, every parameter in order);
CrossEntropyLoss; torch.optim.Adam(lr); the first steps * batch training
images of --data in file order (no shuffling), x / 255 in f32 as the idx
plugin computes it. Every step is the usual optimizer.zero_grad(); loss =
loss_fn(model(x), y); loss.backward(); optimizer.step().

The clock runs over steps --warmup .. --steps - 1 only. Prints one line,

    samples_per_second R seconds S cpu_seconds C timed_steps N losses L1,...

(C: the process's CPU seconds over the same steps, every thread's.)

L1... the loss of each of the first --report steps (%.9g), to hold against
loopkit's metrics.csv. Run with Debian's torch:

    /usr/bin/python3 bench/cnn_torch.py --init FILE --batch B --steps N
      [--warmup W] [--data DIR] [--threads T] [--lr LR] [--report K]

With --epochs E instead of --init and --steps it trains the example
itself from torch's own init, shuffled batches of --batch, and prints each
epoch's seconds and the test accuracy: the reference the README quotes.
"""
import argparse
import gzip
import json
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn


def read_idx(path, magic):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    found = struct.unpack(">I", data[:4])[0]
    if found != magic:
        sys.exit("%s: magic 0x%08x, expected 0x%08x" % (path, found, magic))
    ndim = magic & 0xFF
    dims = struct.unpack(">%dI" % ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim), dims


def find(data_dir, base):
    for name in (base, base + ".gz"):
        path = os.path.join(data_dir, name)
        if os.path.isfile(path):
            return path
    sys.exit("cannot find %s or %s.gz in %s" % (base, base, data_dir))


def load(data_dir, split, n=None):
    prefix = "train" if split == "train" else "t10k"
    images, dims = read_idx(find(data_dir, prefix + "-images-idx3-ubyte"),
                            0x00000803)
    labels, _ = read_idx(find(data_dir, prefix + "-labels-idx1-ubyte"),
                         0x00000801)
    n = dims[0] if n is None else n
    if n > dims[0]:
        sys.exit("%d samples asked for, the file has %d" % (n, dims[0]))
    x = images[:n * 784].astype(np.float32) / np.float32(255)
    x = torch.from_numpy(x.reshape(n, 1, 28, 28))
    y = torch.from_numpy(labels[:n].astype(np.int64))
    return x, y


def network():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


def read_safetensors(model, path):
    buf = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", buf, 0)
    header = json.loads(buf[8:8 + n])
    header.pop("__metadata__", None)
    params = dict(model.named_parameters())
    if set(header) != set(params):
        sys.exit("%s: tensors %s, the model has %s" %
                 (path, sorted(header), sorted(params)))
    with torch.no_grad():
        for name, h in header.items():
            if h["dtype"] != "F32":
                sys.exit("%s: %s is %s, not F32" % (path, name, h["dtype"]))
            a, b = h["data_offsets"]
            v = np.frombuffer(buf, dtype="<f4", count=(b - a) // 4,
                              offset=8 + n + a)
            params[name].copy_(torch.from_numpy(v.copy()).view(h["shape"]))


def read_init(model, path):
    if path.endswith(".safetensors"):
        read_safetensors(model, path)
        return
    raw = np.fromfile(path, dtype="<f4")
    want = sum(p.numel() for p in model.parameters())
    if raw.size != want:
        sys.exit("%s: %d floats, expected %d" % (path, raw.size, want))
    at = 0
    with torch.no_grad():
        for p in model.parameters():
            n = p.numel()
            p.copy_(torch.from_numpy(raw[at:at + n].copy()).view_as(p))
            at += n


def fit(model, opt, train, test, epochs, batch, sched=None):
    """EPOCHS epochs of shuffled batches of BATCH with cross-entropy (SCHED,
    if any, stepped after every batch, as Lightning steps OneCycleLR), each
    followed by the test accuracy in eval mode: prints
    "epoch E seconds S total T test_acc A" a line."""
    (x, y), (tx, ty) = train, test
    loss_fn = nn.CrossEntropyLoss()
    total = 0.0
    for e in range(epochs):
        start = time.perf_counter()
        model.train()
        order = torch.randperm(x.shape[0])
        for i in range(0, x.shape[0], batch):
            idx = order[i:i + batch]
            opt.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            if sched is not None:
                sched.step()
        model.eval()
        with torch.no_grad():
            correct = sum((model(tx[i:i + 1000]).argmax(1) ==
                           ty[i:i + 1000]).sum().item()
                          for i in range(0, tx.shape[0], 1000))
        seconds = time.perf_counter() - start
        total += seconds
        print("epoch %d seconds %.2f total %.2f test_acc %.4f" %
              (e + 1, seconds, total, correct / tx.shape[0]), flush=True)


def epochs(a):
    """The example, as torch trains it: the README's reference."""
    torch.manual_seed(0)
    train, test = load(a.data, "train"), load(a.data, "test")
    model = network()
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    fit(model, opt, train, test, a.epochs, a.batch)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--init")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.001)
    ap.add_argument("--report", type=int, default=20)
    ap.add_argument("--epochs", type=int)
    ap.add_argument("--flush-denormal", action="store_true",
                    help="torch.set_flush_denormal(True): torch at its best")
    ap.add_argument("--autocast-bf16", action="store_true",
                    help="forward and loss under torch.autocast('cpu', bfloat16)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.flush_denormal:
        torch.set_flush_denormal(True)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast_bf16)
    if a.epochs:
        epochs(a)
        return
    if not a.init or not a.steps or not 0 <= a.warmup < a.steps:
        sys.exit("need --init, --steps and 0 <= --warmup < --steps")
    x, y = load(a.data, "train", a.steps * a.batch)
    xs = x.view(a.steps, a.batch, 1, 28, 28)
    ys = y.view(a.steps, a.batch)
    model = network()
    read_init(model, a.init)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    losses = []

    def step(i):
        opt.zero_grad()
        with autocast:
            loss = loss_fn(model(xs[i]), ys[i])
        loss.backward()
        opt.step()
        if i < a.report:
            losses.append(loss.item())

    for i in range(a.warmup):
        step(i)
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(a.warmup, a.steps):
        step(i)
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu
    timed = a.steps - a.warmup
    print("samples_per_second %.1f seconds %.9f cpu_seconds %.9f "
          "timed_steps %d losses %s" %
          (timed * a.batch / seconds, seconds, cpu, timed,
           ",".join("%.9g" % v for v in losses)))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""torch's side of bench/mlp: trains the MLP bench/mlp trains with loopkit,
the same way, and says how fast.

torch.nn.Sequential(Linear, ReLU, Linear, ReLU, ..., Linear) with the layer
sizes of --layers, its weights and biases read from --init (raw
little-endian f32, layer by layer: weight [out, in] row-major then bias
[out], nn.Linear's layout: the file bench/mlp writes and the mlp plugin
reads); CrossEntropyLoss; torch.optim.SGD(lr, momentum); the first
steps * batch training images of --data in file order (no shuffling),
scaled to x / 255 in f32 as the idx plugin does. Every step is the usual
optimizer.zero_grad(); loss = loss_fn(model(x), y); loss.backward();
optimizer.step().

The clock runs over steps --warmup .. --steps - 1 only (the batches are
views of tensors made before, as a DataLoader's would be ready), so that
bench/mlp can compare it with the same steps of loopkit's run. Prints one
line:

    samples_per_second R seconds S timed_steps N loss_at_warmup L1 loss L2

L1 is the loss of the last untimed step (the --warmup-th; nan without
warm-up) and L2 that of the last step (%.9g): the final losses of loopkit's
runs of --warmup and of --steps steps, as its metrics.csv has them.

Run with Debian's torch: /usr/bin/python3 bench/mlp_torch.py --init FILE
--batch B --steps N [--warmup W] [--data DIR] [--threads T] [--lr LR]
[--momentum M] [--layers 784,256,128,10]
"""
import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np
import torch


def read_idx(path, magic):
    """The payload of an IDX file of unsigned bytes, with its dimensions."""
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
    for name in (base, base + ".gz"):  # the plain file first, as idx does
        path = os.path.join(data_dir, name)
        if os.path.isfile(path):
            return path
    sys.exit("cannot find %s or %s.gz in %s" % (base, base, data_dir))


def load(data_dir, n):
    images, dims = read_idx(find(data_dir, "train-images-idx3-ubyte"),
                            0x00000803)
    labels, _ = read_idx(find(data_dir, "train-labels-idx1-ubyte"),
                         0x00000801)
    features = dims[1] * dims[2]
    if n > dims[0]:
        sys.exit("%d samples asked for, the training file has %d" %
                 (n, dims[0]))
    # A division in f32, not a product with 1/255: what idx computes.
    x = images[:n * features].astype(np.float32) / np.float32(255)
    x = torch.from_numpy(x.reshape(n, features))
    y = torch.from_numpy(labels[:n].astype(np.int64))
    return x, y


def build(sizes, init):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    raw = np.fromfile(init, dtype="<f4")
    want = sum((sizes[i] + 1) * sizes[i + 1] for i in range(len(sizes) - 1))
    if raw.size != want:
        sys.exit("%s: %d floats, expected %d" % (init, raw.size, want))
    at = 0
    with torch.no_grad():
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                for p in (layer.weight, layer.bias):
                    n = p.numel()
                    p.copy_(torch.from_numpy(raw[at:at + n].copy()).view_as(p))
                    at += n
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--init", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--layers", default="784,256,128,10")
    ap.add_argument("--flush-denormal", action="store_true",
                    help="torch.set_flush_denormal(True): torch at its best")
    a = ap.parse_args()
    if a.flush_denormal:
        torch.set_flush_denormal(True)
    if not 0 <= a.warmup < a.steps:
        sys.exit("need 0 <= --warmup < --steps")
    torch.set_num_threads(a.threads)
    sizes = [int(s) for s in a.layers.split(",")]
    x, y = load(a.data, a.steps * a.batch)
    xs = x.view(a.steps, a.batch, -1)
    ys = y.view(a.steps, a.batch)
    model = build(sizes, a.init)
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)

    def step(i):
        opt.zero_grad()
        loss = loss_fn(model(xs[i]), ys[i])
        loss.backward()
        opt.step()
        return loss

    warm = float("nan")
    for i in range(a.warmup):
        loss = step(i)
    if a.warmup:
        warm = loss.item()
    start = time.perf_counter()
    for i in range(a.warmup, a.steps):
        loss = step(i)
    seconds = time.perf_counter() - start
    timed = a.steps - a.warmup
    print("samples_per_second %.1f seconds %.9f timed_steps %d "
          "loss_at_warmup %.9g loss %.9g" %
          (timed * a.batch / seconds, seconds, timed, warm, loss.item()))


if __name__ == "__main__":
    main()

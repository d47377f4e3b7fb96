#!/usr/bin/python3
"""Batch norm's buffers out of loopkit and into torch, and back (issue 25
item 6). Run with Debian's torch (python3-torch 1.13), no network:

    /usr/bin/python3 tests/torch/bn_roundtrip_reference.py init tests/data/buffers
    /usr/bin/python3 tests/torch/bn_roundtrip_reference.py predict EXPORT tests/data/buffers

`init` writes, from torch.manual_seed(0):
- init.safetensors: the full state_dict() of NET below (parameters and
  buffers, num_batches_tracked as I64), its running statistics set to
  values other than torch's fresh ones so that a loader that skips them is
  seen;
- unexpected.safetensors: the same plus a key the net does not have
  ("9.weight"); missing.safetensors: the same without "1.running_var".

`predict` loads EXPORT, loopkit's export of that net trained by
tests/cli/buffers.sh (one epoch of tests/data/sequential's 8 images, two
batches of 4, SGD lr 0.1, from init.safetensors), with
load_state_dict(strict=True), and writes predictions.csv: the net in eval
mode on tests/data/sequential's 4 test images (x / 255), in `loopkit
predict`'s layout (index,pred,p0,p1,p2; the softmax in float64). The
test then needs no torch: loopkit predict must give these to 1e-5.
"""
import json
import os
import struct
import sys

import torch
import torch.nn as nn

LAYERS = ("conv2d(4, 3, padding=1), batchnorm2d, relu, maxpool2d(2), "
          "flatten, linear(8), batchnorm1d, relu, linear(3)")
HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "sequential")
CODES = {torch.float32: ("F32", "<f"), torch.float64: ("F64", "<d"),
         torch.int64: ("I64", "<q")}
DTYPES = {"F32": (torch.float32, "<f", 4), "F64": (torch.float64, "<d", 8),
          "I64": (torch.int64, "<q", 8)}


def network():
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 8), nn.BatchNorm1d(8),
        nn.ReLU(), nn.Linear(8, 3))


def write_st(path, tensors):
    header, blobs, at = {}, [], 0
    for name, t in tensors.items():
        code, fmt = CODES[t.dtype]
        flat = t.detach().reshape(-1).tolist()
        blob = struct.pack("<%d%s" % (len(flat), fmt[1]), *flat)
        header[name] = {"dtype": code, "shape": list(t.shape),
                        "data_offsets": [at, at + len(blob)]}
        blobs.append(blob)
        at += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_st(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        dtype, fmt, size = DTYPES[h["dtype"]]
        b, e = h["data_offsets"]
        vals = struct.unpack("<%d%s" % ((e - b) // size, fmt[1]),
                             raw[8 + n + b:8 + n + e])
        out[name] = torch.tensor(vals, dtype=dtype).reshape(h["shape"])
    return out


def read_idx_images(path):
    with open(path, "rb") as f:
        raw = f.read()
    count, rows, cols = struct.unpack(">III", raw[4:16])
    x = torch.tensor(list(raw[16:]), dtype=torch.float32) / 255
    return x.reshape(count, 1, rows, cols)


def init(out):
    torch.manual_seed(0)
    net = network()
    with torch.no_grad():
        for i in (1, 6):
            bn = net[i]
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.num_batches_tracked.fill_(5)
    sd = net.state_dict()
    write_st(os.path.join(out, "init.safetensors"), sd)
    extra = dict(sd)
    extra["9.weight"] = torch.zeros(3)
    write_st(os.path.join(out, "unexpected.safetensors"), extra)
    lacking = {k: v for k, v in sd.items() if k != "1.running_var"}
    write_st(os.path.join(out, "missing.safetensors"), lacking)


def predict(export, out):
    net = network()
    net.load_state_dict(read_st(export), strict=True)
    net.eval()
    x = read_idx_images(os.path.join(DATA, "t10k-images-idx3-ubyte"))
    with torch.no_grad():
        logits = net(x).double()
    p = torch.softmax(logits, dim=1)
    with open(os.path.join(out, "predictions.csv"), "w") as f:
        f.write("index,pred,p0,p1,p2\n")
        for i in range(p.shape[0]):
            f.write("%d,%d,%s\n" % (i, int(torch.argmax(logits[i])),
                                    ",".join("%.17g" % v for v in p[i])))


if __name__ == "__main__":
    if sys.argv[1:2] == ["init"] and len(sys.argv) == 3:
        init(sys.argv[2])
    elif sys.argv[1:2] == ["predict"] and len(sys.argv) == 4:
        predict(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)

#!/usr/bin/python3
"""safetensors between torch and loopkit, both ways.

Run with Debian's torch (python3-torch 1.13), which has no safetensors
package: the few lines of the format this needs are written out below.

    /usr/bin/python3 tests/torch/safetensors_reference.py write
        writes tests/data/st_torch_mlp.safetensors (a torch-initialised
        4-8-3 ReLU MLP, torch.manual_seed(0), with loopkit's mlp names)
        and tests/data/st_torch_mlp.ref: the logits of the first sample,
        the mean cross-entropy loss on tests/data/st_mlp.csv and that loss
        after one SGD step (lr 0.1), %.9g

    /usr/bin/python3 tests/torch/safetensors_reference.py check FILE
        loads FILE, which loopkit exported from a run that started from
        st_torch_mlp.safetensors and took one SGD step (lr 0.1) on all 16
        samples, into the torch module (load_state_dict, strict), and
        checks it against torch's own step: the same names, dtypes and
        shapes, weights within 1e-6, metadata format = pt, step = 1.
        Exit status 0 when it agrees; tests/cli/safetensors.sh runs this
        when torch is installed.

loopkit's mlp names its parameters layer<i>.weight and layer<i>.bias: a
module whose nn.Linear layers are attributes layer0, layer1, ... has the
same state_dict names.
"""
import json
import os
import struct
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")
DTYPES = {torch.float32: "F32", torch.float64: "F64"}
TORCH = {v: k for k, v in DTYPES.items()}
SIZES = {"F32": 4, "F64": 8}


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer0 = torch.nn.Linear(4, 8)
        self.layer1 = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.layer1(torch.relu(self.layer0(x)))


def save(path, tensors, metadata):
    """The format as the reference writes it: 8-byte little-endian header
    length, the JSON header padded with spaces to a multiple of 8, then
    every tensor's little-endian bytes, back to back."""
    header, blobs, at = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        blob = t.detach().contiguous().numpy().astype(
            t.numpy().dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [at, at + len(blob)]}
        blobs.append(blob)
        at += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def load(path):
    """(tensors, metadata), checking what a torch user would rely on."""
    buf = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", buf, 0)
    header = json.loads(buf[8:8 + n].decode("utf-8"))
    data = buf[8 + n:]
    metadata = header.pop("__metadata__", {})
    tensors, covered = {}, 0
    for name, t in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
        b, e = t["data_offsets"]
        assert b == covered, "%s: a hole or an overlap at %d" % (name, b)
        numel = 1
        for d in t["shape"]:
            numel *= d
        assert e - b == numel * SIZES[t["dtype"]], name + ": size"
        covered = e
        tensors[name] = torch.frombuffer(bytearray(data[b:e]),
                                         dtype=TORCH[t["dtype"]]).reshape(
                                             t["shape"])
    assert covered == len(data), "bytes after the last tensor"
    return tensors, metadata


def samples():
    rows = open(os.path.join(DATA, "st_mlp.csv")).read().split("\n")[1:]
    rows = [r.split(",") for r in rows if r]
    x = torch.tensor([[float(v) for v in r[:4]] for r in rows])
    y = torch.tensor([int(r[4]) for r in rows])
    return x, y


def one_step(model, x, y):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


def write():
    torch.manual_seed(0)
    model = MLP()
    path = os.path.join(DATA, "st_torch_mlp.safetensors")
    save(path, model.state_dict(), {"format": "pt"})
    x, y = samples()
    with torch.no_grad():
        logits = model(x)
    first = one_step(model, x, y)
    with torch.no_grad():
        second = torch.nn.functional.cross_entropy(model(x), y).item()
    with open(os.path.join(DATA, "st_torch_mlp.ref"), "w") as f:
        f.write("# tests/torch/safetensors_reference.py write: torch %s\n"
                % torch.__version__)
        f.write("logits0 %s\n" % " ".join("%.9g" % v for v in logits[0]))
        f.write("loss1 %.9g\n" % first)
        f.write("loss2 %.9g\n" % second)


def check(path):
    tensors, metadata = load(path)
    assert metadata.get("format") == "pt", metadata
    assert metadata.get("step") == "1", metadata
    assert metadata.get("plugin") == "mlp", metadata
    mine, _ = load(os.path.join(DATA, "st_torch_mlp.safetensors"))
    model = MLP()
    model.load_state_dict(mine, strict=True)
    x, y = samples()
    one_step(model, x, y)
    theirs = MLP()
    theirs.load_state_dict(tensors, strict=True)  # names and shapes
    worst = 0.0
    for name, t in model.state_dict().items():
        assert tensors[name].dtype == torch.float32, name
        worst = max(worst, (tensors[name] - t).abs().max().item())
    assert worst < 1e-6, "weights differ by %g" % worst
    print("torch agrees with %s: %d tensors, largest difference %.3g"
          % (path, len(tensors), worst))


if __name__ == "__main__":
    if sys.argv[1:] == ["write"]:
        write()
    elif len(sys.argv) == 3 and sys.argv[1] == "check":
        check(sys.argv[2])
    else:
        sys.exit(__doc__)

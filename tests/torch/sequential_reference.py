#!/usr/bin/python3
"""Reference training of the sequential plugin's layers, by torch.

Run with Debian's torch (python3-torch 1.13), no network:

    /usr/bin/python3 tests/torch/sequential_reference.py tests/data/sequential

It writes into that directory everything tests/cli/sequential.sh needs,
so that the test needs neither torch nor numpy:

- train-images-idx3-ubyte, train-labels-idx1-ubyte (8 images of 1 x 8 x 8,
  labels 0..2) and t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (4):
  data for the idx plugin;
- init.f32: the network's initial parameters (torch's init from a fixed
  seed, the norms' weights and biases drawn too so that their gradients
  count), every parameter in order, raw little-endian f32: what the plugin's
  init option reads; init.safetensors: the same parameters by name
  (model.named_parameters(), F32), written with the standard library;
- reference.txt: what torch computes training that network for one epoch of
  two batches of 4 in file order with SGD lr 0.1 (x / 255 as idx's normalize
  = scale), in the layout of `loopkit dump` (NAME[INDEX] VALUE): the loss of
  each step (loss[STEP]), every parameter after the two steps, batch norm's
  running statistics and counts (as the plugin's state, named
  sequential.N.running_mean ...), and the test split's mean loss and
  accuracy in eval mode (test_loss[0], test_acc[0]).

The network covers every layer but dropout (whose masks come from loopkit's
generator, not torch's): conv2d with padding, strides and a non-square
kernel, batch norm 2d and 1d, max and average pooling (padding counted),
ReLU, GELU (tanh), tanh, sigmoid, flatten, linear, layer norm. The same
network in the plugin's syntax is LAYERS below; the test reads it from
reference.txt's first line.
"""
import json
import os
import struct
import sys

import torch
import torch.nn as nn

LAYERS = ("conv2d(4, 3, padding=1), batchnorm2d, relu, maxpool2d(2), "
          "conv2d(6, (3, 2), stride=(1, 2), padding=(1, 0)), "
          "gelu(approximate='tanh'), avgpool2d(2, stride=1, padding=1), tanh, "
          "flatten, linear(16), layernorm, sigmoid, batchnorm1d, linear(3)")


def network():
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(4, 6, (3, 2), stride=(1, 2), padding=(1, 0)),
        nn.GELU(approximate="tanh"), nn.AvgPool2d(2, stride=1, padding=1),
        nn.Tanh(), nn.Flatten(), nn.Linear(90, 16), nn.LayerNorm(16),
        nn.Sigmoid(), nn.BatchNorm1d(16), nn.Linear(16, 3))


def write_idx(path, magic, dims, payload):
    with open(path, "wb") as f:
        f.write(struct.pack(">I", magic))
        f.write(struct.pack(">%dI" % len(dims), *dims))
        f.write(bytes(payload))


def write_safetensors(path, named):
    header, data = {}, b""
    for name, t in named:
        raw = t.detach().contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/data/sequential"
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(14)
    torch.set_num_threads(1)
    images = torch.randint(0, 256, (12, 8, 8), dtype=torch.uint8)
    labels = torch.tensor([0, 1, 2, 1, 2, 0, 0, 1, 2, 0, 1, 1],
                          dtype=torch.uint8)
    write_idx(os.path.join(out_dir, "train-images-idx3-ubyte"), 0x803,
              (8, 8, 8), images[:8].flatten().tolist())
    write_idx(os.path.join(out_dir, "train-labels-idx1-ubyte"), 0x801, (8,),
              labels[:8].tolist())
    write_idx(os.path.join(out_dir, "t10k-images-idx3-ubyte"), 0x803,
              (4, 8, 8), images[8:].flatten().tolist())
    write_idx(os.path.join(out_dir, "t10k-labels-idx1-ubyte"), 0x801, (4,),
              labels[8:].tolist())
    # as idx computes it: a division in f32
    x = images.to(torch.float32).div(torch.tensor(255, dtype=torch.float32))
    x = x.view(12, 1, 8, 8)
    y = labels.to(torch.int64)

    model = network()
    with torch.no_grad():
        for m in model:
            if isinstance(m, (nn.BatchNorm2d, nn.BatchNorm1d, nn.LayerNorm)):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    flat.numpy().astype("<f4").tofile(os.path.join(out_dir, "init.f32"))
    write_safetensors(os.path.join(out_dir, "init.safetensors"),
                      model.named_parameters())

    lines = ["layers %s" % LAYERS]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for step in range(2):
        xb, yb = x[4 * step:4 * step + 4], y[4 * step:4 * step + 4]
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        lines.append("loss[%d] %.9g" % (step + 1, loss.item()))
    for name, p in model.named_parameters():
        for i, v in enumerate(p.detach().flatten().tolist()):
            lines.append("%s[%d] %.9g" % (name, i, v))
    for name, b in model.named_buffers():
        for i, v in enumerate(b.flatten().tolist()):
            lines.append("sequential.%s[%d] %.17g" % (name, i, float(v)))
    model.eval()
    with torch.no_grad():
        logits = model(x[8:])
        lines.append("test_loss[0] %.9g" % loss_fn(logits, y[8:]).item())
        acc = (logits.argmax(1) == y[8:]).float().mean().item()
        lines.append("test_acc[0] %.9g" % acc)
    with open(os.path.join(out_dir, "reference.txt"), "w") as f:
        f.write("# tests/torch/sequential_reference.py, torch %s\n" %
                torch.__version__)
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

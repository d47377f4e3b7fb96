#!/usr/bin/python3
"""Reference training of a residual CNN written in the sequential plugin's
syntax of branches (@NAME, add(@NAME), a section used as a block), by
torch.

Run with Debian's torch (python3-torch 1.13), no network:

    /usr/bin/python3 tests/torch/residual.py tests/data/residual

It writes into that directory everything tests/cli/branch.sh needs, so
that the test needs neither torch nor numpy:

- train-images-idx3-ubyte, train-labels-idx1-ubyte (16 images of 1 x 8 x 8,
  labels 0..9) and t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (4): data
  for the idx plugin;
- init.safetensors: the network's initial parameters (torch's init from a
  fixed seed), by the names torch gives them (named_parameters(), F32): the
  blocks are nested nn.Sequential, so "3.0.weight", "3.1.bias";
- losses.txt: the loss of each of 20 steps of SGD (lr 0.01, momentum 0.9)
  on batches of 4 in file order (5 epochs of 4 batches), batch norm in
  training mode, x / 255 as idx's normalize = scale computes it; one line
  a step, "STEP LOSS".

The network is the example of the syntax: a ResNet basic block, [res16],
used twice:

    [res16]
    layers = @in, conv2d(16, 3, padding=1, bias=false), batchnorm2d, relu,
             conv2d(16, 3, padding=1, bias=false), batchnorm2d, add(@in),
             relu
    [sequential]
    layers = conv2d(16, 3, padding=1), batchnorm2d, relu, res16, res16,
             maxpool2d(2), flatten, linear(10)

In torch the block is an nn.Sequential subclass whose forward adds the
block's input back before the last ReLU; add, a module of no parameters,
keeps its index (5) as the plugin counts it.
"""
import os
import sys

import torch
import torch.nn as nn

# the IDX and safetensors writers of the sequential reference, beside this
from sequential_reference import write_idx, write_safetensors

BLOCK = ("@in, conv2d(16, 3, padding=1, bias=false), batchnorm2d, relu, "
         "conv2d(16, 3, padding=1, bias=false), batchnorm2d, add(@in), relu")
LAYERS = ("conv2d(16, 3, padding=1), batchnorm2d, relu, res16, res16, "
          "maxpool2d(2), flatten, linear(10)")
STEPS, BATCH = 20, 4


class Add(nn.Module):
    """add(@in): no parameters; the block's forward does the sum."""

    def forward(self, x):
        return x


class Res(nn.Sequential):
    def __init__(self, c):
        super().__init__(
            nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c),
            nn.ReLU(), nn.Conv2d(c, c, 3, padding=1, bias=False),
            nn.BatchNorm2d(c), Add(), nn.ReLU())

    def forward(self, x):
        h = x
        for i, m in enumerate(self):
            h = h + x if i == 5 else m(h)
        return h


def network():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        Res(16), Res(16), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(16 * 4 * 4, 10))


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/data/residual"
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(25)
    torch.set_num_threads(1)
    images = torch.randint(0, 256, (20, 8, 8), dtype=torch.uint8)
    labels = torch.randint(0, 10, (20,), dtype=torch.uint8)
    write_idx(os.path.join(out_dir, "train-images-idx3-ubyte"), 0x803,
              (16, 8, 8), images[:16].flatten().tolist())
    write_idx(os.path.join(out_dir, "train-labels-idx1-ubyte"), 0x801, (16,),
              labels[:16].tolist())
    write_idx(os.path.join(out_dir, "t10k-images-idx3-ubyte"), 0x803,
              (4, 8, 8), images[16:].flatten().tolist())
    write_idx(os.path.join(out_dir, "t10k-labels-idx1-ubyte"), 0x801, (4,),
              labels[16:].tolist())
    # as idx computes it: a division in f32
    x = images.to(torch.float32).div(torch.tensor(255, dtype=torch.float32))
    x = x.view(20, 1, 8, 8)
    y = labels.to(torch.int64)

    model = network()
    write_safetensors(os.path.join(out_dir, "init.safetensors"),
                      model.named_parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    lines = []
    for step in range(STEPS):
        b = step % (16 // BATCH)
        xb, yb = x[BATCH * b:BATCH * b + BATCH], y[BATCH * b:BATCH * b + BATCH]
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        lines.append("%d %.9g" % (step, loss.item()))
    with open(os.path.join(out_dir, "losses.txt"), "w") as f:
        f.write("# tests/torch/residual.py, torch %s\n" % torch.__version__)
        f.write("# [res16] layers = %s\n" % BLOCK)
        f.write("# [sequential] layers = %s\n" % LAYERS)
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""torch's side of examples/fashion-mnist-resnet.ini: the same residual
network, optimizer, schedule and batch size, trained from torch's own init
on shuffled batches, as the README's reference for the example.

    stem:  conv(1->32, 3x3, pad 1, no bias) - BN - ReLU - maxpool 2
    res32: x + BN(conv(ReLU(BN(conv(x))))) then ReLU   (32 channels, 14x14)
    conv(32->64, 3x3, pad 1, no bias) - BN - ReLU - maxpool 2
    res64: the same block with 64 channels (7x7)
    flatten - linear(3136->10)

AdamW (lr from the schedule, weight_decay as the example's), OneCycleLR
(max_lr, total_steps = epochs * batches an epoch, torch's defaults
otherwise: it steps after every batch and cycles beta1), CrossEntropyLoss,
x / 255 in f32 as the idx plugin computes it. Prints each epoch's seconds
and the test accuracy in eval mode (batch norm on its running statistics):

    epoch E seconds S total T test_acc A

    /usr/bin/python3 bench/resnet_torch.py [--epochs E] [--threads T]
      [--batch B] [--max-lr LR] [--weight-decay WD] [--data DIR]
      [--flush-denormal]
"""
import argparse
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cnn_torch import fit, load  # noqa: E402  (bench/cnn's reader and loop)


class Block(nn.Sequential):
    """A ResNet basic block as the config writes it:
    @in, conv, bn, relu, conv, bn, add(@in), relu. Its children are named
    0..6 as nn.Sequential's are (index 5 is add, which holds nothing), so
    that its parameters are named as loopkit names them (3.0.weight)."""

    def __init__(self, c):
        super().__init__(
            nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c),
            nn.ReLU(), nn.Conv2d(c, c, 3, padding=1, bias=False),
            nn.BatchNorm2d(c), nn.Identity(), nn.ReLU())

    def forward(self, x):
        h = x
        for i, m in enumerate(self):
            h = h + x if i == 5 else m(h)
        return h


def network():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32),
        nn.ReLU(), nn.MaxPool2d(2), Block(32),
        nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64),
        nn.ReLU(), nn.MaxPool2d(2), Block(64), nn.Flatten(),
        nn.Linear(3136, 10))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--max-lr", type=float, default=0.004)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--flush-denormal", action="store_true",
                    help="torch.set_flush_denormal(True): torch at its best")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.flush_denormal:
        torch.set_flush_denormal(True)
    torch.manual_seed(0)
    train, test = load(a.data, "train"), load(a.data, "test")
    model = network()
    opt = torch.optim.AdamW(model.parameters(), lr=a.max_lr,
                            weight_decay=a.weight_decay)
    per_epoch = (train[0].shape[0] + a.batch - 1) // a.batch
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=a.max_lr, total_steps=a.epochs * per_epoch)
    fit(model, opt, train, test, a.epochs, a.batch, sched)

if __name__ == "__main__":
    main()

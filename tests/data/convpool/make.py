#!/usr/bin/python3
"""tests/data/convpool: 48 sequences [2, 16] (float32) of 3 classes, a sine
of the class's frequency in channel 0 and its cosine in channel 1, phase and
noise random, for tests/cli/convpool.sh. Run from this directory:
/usr/bin/python3 make.py"""
import numpy as np

rng = np.random.default_rng(27)
n, L = 48, 16
y = np.arange(n) % 3
t = np.arange(L)
phase = rng.uniform(0, 2 * np.pi, n)[:, None]
w = (1 + y)[:, None] * 2 * np.pi / L
x = np.stack([np.sin(w * t + phase), np.cos(w * t + phase)], axis=1)
x += 0.1 * rng.standard_normal(x.shape)
np.save("seq_x.npy", x.astype(np.float32))
np.save("seq_y.npy", y.astype(np.int64))

#!/usr/bin/python3
"""Reference step of embedding(padding_idx) by torch, for tests/cli/tokens.sh.

Run with Debian's torch (python3-torch 1.13), no network:

    /usr/bin/python3 tests/torch/embedding_padding_reference.py tests/data/embedding_padding

It writes into that directory, so that the test needs neither torch nor
numpy:

- x.npy (int64 [8, 6] tokens in [0, 10), token 2 among them) and y.npy
  (int64 [8] labels in [0, 3)): data for the npy plugin with tokens = 10;
- init.safetensors: the parameters of nn.Sequential(nn.Embedding(10, 4,
  padding_idx=2), nn.Flatten(), nn.Linear(24, 3)) from a fixed seed, the
  padding row set to nonzero values (as a loaded file may have it: torch
  uses it in the forward and never changes it);
- reference.txt: the parameters after one step of SGD lr 0.5 on the batch
  of 8 (cross-entropy, mean), as `loopkit dump` prints them (NAME[INDEX]
  VALUE), and the step's loss (loss[0]).
"""
import json
import os
import struct
import sys

import torch
import torch.nn as nn

LAYERS = "embedding(10, 4, padding_idx=2), flatten, linear(3)"


def npy(path, values, shape):
    header = "{'descr': '<i8', 'fortran_order': False, 'shape': (%s), }" % (
        ''.join('%d, ' % d for d in shape))
    header += ' ' * (63 - (10 + len(header)) % 64) + '\n'
    with open(path, 'wb') as f:
        f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(header)))
        f.write(header.encode('latin1'))
        f.write(struct.pack('<%dq' % len(values), *values))


def safetensors(path, named):
    meta, blob = {}, b''
    for name, t in named:
        data = t.detach().contiguous().float().numpy().tobytes()
        meta[name] = {'dtype': 'F32', 'shape': list(t.shape),
                      'data_offsets': [len(blob), len(blob) + len(data)]}
        blob += data
    head = json.dumps(meta).encode()
    head += b' ' * (-len(head) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(head)) + head + blob)


def main(out):
    torch.manual_seed(5)
    x = torch.randint(0, 10, (8, 6))
    x[0, 0] = x[3, 5] = x[7, 2] = 2  # the padding token, surely
    y = torch.randint(0, 3, (8,))
    net = nn.Sequential(nn.Embedding(10, 4, padding_idx=2), nn.Flatten(),
                        nn.Linear(24, 3))
    with torch.no_grad():
        net[0].weight[2] = torch.tensor([0.5, -0.25, 0.75, -1.0])
    os.makedirs(out, exist_ok=True)
    npy(os.path.join(out, 'x.npy'), x.flatten().tolist(), (8, 6))
    npy(os.path.join(out, 'y.npy'), y.tolist(), (8,))
    safetensors(os.path.join(out, 'init.safetensors'), net.named_parameters())
    opt = torch.optim.SGD(net.parameters(), lr=0.5)
    loss = nn.functional.cross_entropy(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    with open(os.path.join(out, 'reference.txt'), 'w') as f:
        f.write('layers %s\n' % LAYERS)
        f.write('loss[0] %.9g\n' % loss.item())
        for name, p in net.named_parameters():
            for i, v in enumerate(p.detach().flatten().tolist()):
                f.write('%s[%d] %.9g\n' % (name, i, v))


if __name__ == '__main__':
    main(sys.argv[1])

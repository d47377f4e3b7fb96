#!/usr/bin/python3
"""Reference forward and backward of the recurrent layers of issue 27
(lstm, gru): torch.nn.LSTM and nn.GRU with batch_first=True, zero initial
states, in float64 on float32 inputs and parameters (the reference is
torch's definition without float32's rounding).

Run with Debian's torch (python3-torch 1.13), no network:

    /usr/bin/python3 tests/torch/rnn_reference.py > tests/data/rnn.ref

Each case is one layer, as sequential's `layers` writes it, on a batch
[N, T, C] of normals, the output's gradient dy normals too. The file is

    case TEXT N T C
    t NAME COUNT V1 V2 ...   (x, dy and the parameters, in torch's order
                              and names, float32 as %.9g; then torch's y,
                              dx and each parameter's gradient, named
                              grad.NAME, float64 as %.17g)
    end

tests/test_rnn.c reads it.
"""
import sys

import torch
from torch import nn

torch.set_num_threads(1)
out = sys.stdout


def emit(name, t):
    t = t.detach().reshape(-1)
    f = "%.9g" if t.dtype == torch.float32 else "%.17g"
    out.write("t %s %d %s\n" % (name, t.numel(),
                                 " ".join(f % v for v in t.tolist())))


def case(text, cls, H, N, T, C, seed, **kw):
    torch.manual_seed(seed)
    m = cls(C, H, batch_first=True, **kw)
    x = torch.randn(N, T, C)
    D = 2 if kw.get("bidirectional") else 1
    dy = torch.randn(N, T, D * H)
    out.write("case %s %d %d %d\n" % (text, N, T, C))
    emit("x", x)
    emit("dy", dy)
    for name, p in m.named_parameters():
        emit(name, p)
    m = m.double()
    xg = x.double().requires_grad_(True)
    y, _ = m(xg)
    y.backward(dy.double())
    emit("y", y)
    emit("dx", xg.grad)
    for name, p in m.named_parameters():
        emit("grad." + name, p.grad)
    out.write("end\n")


out.write("# loopkit recurrent layers: tests/torch/rnn_reference.py, "
          "torch %s\n" % torch.__version__)
seed = 1
for name, cls in (("lstm", nn.LSTM), ("gru", nn.GRU)):
    for text, kw in (
            ("%s(3)", {}),
            ("%s(3,2)", {"num_layers": 2}),
            ("%s(3,bidirectional=true)", {"bidirectional": True}),
            ("%s(3,bias=false)", {"bias": False}),
            ("%s(3,2,bias=false,bidirectional=true)",
             {"num_layers": 2, "bias": False, "bidirectional": True}),
            ("%s(4,input_size=5)", {})):
        case(text % name, cls, int(text.split("(")[1].split(",")[0].rstrip(")")),
             3, 6, 5, seed, **kw)
        seed += 1

#!/usr/bin/python3
"""Reference forward and backward of the activation layers of issue 27
(silu, leakyrelu, elu, softplus, mish, hardswish, hardsigmoid, softmax,
logsoftmax, identity), every argument form, as torch.nn's modules compute
them on the CPU, in float64 on float32 inputs: the reference is torch's
definition (thresholds and kinks included) without float32's own
rounding, which is not always small (torch's float32 ELU takes e^x - 1:
at x = -1e-7 it is 19% off, where the kit's expm1 is exact).

Run with Debian's torch (python3-torch 1.13), no network:

    /usr/bin/python3 tests/torch/activations_reference.py \
        > tests/data/activations.ref

The elementwise layers take one fixed input [4, 16] holding their kinks
(0, -3, 3, softplus's threshold), tiny values (where e^x - 1 and
log(1 + e^x) cancel), large ones (+-20, +-30, +-100) and random normals;
the softmaxes take random inputs over [4, 16] and [2, 3, 4, 5], with
large values in some lines. The file is

    case TEXT N D1 D2 ...    (the layer as sequential's `layers` writes it,
                              without spaces; the batch N, a sample's shape)
    t NAME COUNT V1 V2 ...   (x and dy, float32 as %.9g; then torch's y
                              and dx, float64 as %.17g)
    end

tests/test_activations.c reads it.
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


def case(text, module, x, seed):
    torch.manual_seed(seed)
    dy = torch.randn(x.shape)
    xg = x.double().requires_grad_(True)
    y = module.double()(xg)
    y.backward(dy.double())
    out.write("case %s %d %s\n" % (text, x.shape[0],
                                    " ".join(str(d) for d in x.shape[1:])))
    emit("x", x)
    emit("dy", dy)
    emit("y", y)
    emit("dx", xg.grad)
    out.write("end\n")


def elementwise_input():
    fixed = [0.0, -0.0, -3.0, 3.0, -2.999, 3.001, 1e-7, -1e-7, 1e-4, -1e-4,
             0.01, -0.01, 0.5, -0.5, 1.0, -1.0, 2.5, -2.5, 5.0, -5.0, 10.0,
             -10.0, 20.0, -20.0, 20.5, 30.0, -30.0, 100.0, -100.0, 0.3466,
             -0.3466, -87.0]
    torch.manual_seed(0)
    rest = torch.randn(64 - len(fixed)) * 2
    return torch.cat([torch.tensor(fixed), rest]).reshape(4, 16)


def main():
    out.write("# loopkit activations: tests/torch/activations_reference.py, "
              "torch %s\n" % torch.__version__)
    x = elementwise_input()
    cases = [
        ("silu", nn.SiLU()),
        ("SiLU", nn.SiLU()),
        ("leakyrelu", nn.LeakyReLU()),
        ("leakyrelu(0.2)", nn.LeakyReLU(0.2)),
        ("LeakyReLU(negative_slope=-0.5)", nn.LeakyReLU(negative_slope=-0.5)),
        ("elu", nn.ELU()),
        ("elu(0.5)", nn.ELU(0.5)),
        ("ELU(alpha=2.0)", nn.ELU(alpha=2.0)),
        ("softplus", nn.Softplus()),
        ("softplus(2.0)", nn.Softplus(2.0)),
        ("softplus(2,5)", nn.Softplus(2, 5)),
        ("Softplus(beta=0.5,threshold=3.0)",
         nn.Softplus(beta=0.5, threshold=3.0)),
        ("softplus(threshold=-1)", nn.Softplus(threshold=-1)),
        ("mish", nn.Mish()),
        ("hardswish", nn.Hardswish()),
        ("hardsigmoid", nn.Hardsigmoid()),
        ("identity", nn.Identity()),
    ]
    for i, (text, m) in enumerate(cases):
        case(text, m, x, 100 + i)
    torch.manual_seed(1)
    v = torch.randn(4, 16) * 3
    v[1] += 50  # a line far from 0: the maximum's shift matters
    v[2, 3] = 90.0
    w = torch.randn(2, 3, 4, 5) * 3
    w[1, :, 2, 1] = torch.tensor([80.0, -80.0, 0.0])
    soft = [
        ("softmax(1)", nn.Softmax(1), v),
        ("softmax(-1)", nn.Softmax(-1), v),
        ("Softmax(dim=1)", nn.Softmax(dim=1), w),
        ("softmax(2)", nn.Softmax(2), w),
        ("softmax(-1)", nn.Softmax(-1), w),
        ("softmax(dim=-3)", nn.Softmax(dim=-3), w),
        ("logsoftmax(1)", nn.LogSoftmax(1), v),
        ("LogSoftmax(dim=-1)", nn.LogSoftmax(dim=-1), v),
        ("logsoftmax(1)", nn.LogSoftmax(1), w),
        ("logsoftmax(2)", nn.LogSoftmax(2), w),
        ("logsoftmax(3)", nn.LogSoftmax(3), w),
    ]
    for i, (text, m, inp) in enumerate(soft):
        case(text, m, inp, 200 + i)


main()

#!/usr/bin/python3
"""Reference forward and backward of the convolutions and pools of issue 27
item 1 (conv1d, conv2d with dilation and groups, maxpool1d, avgpool1d,
adaptiveavgpool1d, adaptiveavgpool2d), every argument form, as torch.nn's
modules compute them on the CPU, in float64 on float32 inputs and weights.

Run with Debian's torch (python3-torch 1.13), no network:

    /usr/bin/python3 tests/torch/convpool_reference.py \
        > tests/data/convpool.ref

The file is

    case TEXT N D1 D2 ...    (the layer as sequential's `layers` writes it,
                              without spaces; the batch N, a sample's shape)
    t NAME COUNT V1 V2 ...   (x, dy, weight, bias: float32 as %.9g; then
                              torch's y, dx, dweight, dbias: float64 as
                              %.17g)
    end

tests/test_convpool.c reads it.
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


def case(text, module, shape, seed):
    torch.manual_seed(seed)
    x = torch.randn(shape)
    if "maxpool" in text:  # no ties: a tie's argmax is a matter of order
        x = torch.randperm(x.numel()).float().reshape(shape) / x.numel() - 0.5
    params = [p.detach().clone() for p in module.parameters()]
    m = module.double()
    xg = x.double().requires_grad_(True)
    y = m(xg)
    dy = torch.randn(y.shape)
    y.backward(dy.double())
    out.write("case %s %d %s\n" % (text, shape[0],
                                    " ".join(str(d) for d in shape[1:])))
    emit("x", x)
    emit("dy", dy)
    names = ["weight", "bias"]
    for name, p in zip(names, params):
        emit(name, p)
    emit("y", y)
    emit("dx", xg.grad)
    for name, p in zip(names, m.parameters()):
        emit("d" + name, p.grad)
    out.write("end\n")


def main():
    out.write("# loopkit convolutions and pools: "
              "tests/torch/convpool_reference.py, torch %s\n" %
              torch.__version__)
    torch.manual_seed(1)
    cases = [
        # conv1d: defaults, stride, padding, dilation, groups, depthwise,
        # no bias, odd sizes
        ("conv1d(4,3)", lambda: nn.Conv1d(3, 4, 3), (2, 3, 11)),
        ("Conv1d(5,3,stride=2,padding=1)",
         lambda: nn.Conv1d(2, 5, 3, stride=2, padding=1), (3, 2, 10)),
        ("conv1d(4,3,dilation=2,padding=2)",
         lambda: nn.Conv1d(3, 4, 3, dilation=2, padding=2), (2, 3, 9)),
        ("conv1d(6,3,1,1,1,3)",
         lambda: nn.Conv1d(6, 6, 3, 1, 1, 1, 3), (2, 6, 7)),
        ("conv1d(4,5,groups=4,bias=false,dilation=3,stride=3)",
         lambda: nn.Conv1d(4, 4, 5, stride=3, dilation=3, groups=4,
                           bias=False), (2, 4, 23)),
        ("conv1d(6,2,groups=2)", lambda: nn.Conv1d(4, 6, 2, groups=2),
         (3, 4, 5)),
        # conv2d: dilation, groups, depthwise, mixed pairs, and the fast
        # paths (stride 1 "same", strided) as they were
        ("conv2d(4,3,padding=1)", lambda: nn.Conv2d(3, 4, 3, padding=1),
         (2, 3, 7, 6)),
        ("conv2d(4,3,stride=2)", lambda: nn.Conv2d(3, 4, 3, stride=2),
         (2, 3, 9, 8)),
        ("conv2d(4,3,padding=2,dilation=2)",
         lambda: nn.Conv2d(3, 4, 3, padding=2, dilation=2), (2, 3, 7, 9)),
        ("conv2d(4,(3,2),stride=(2,1),padding=(1,2),dilation=(2,3))",
         lambda: nn.Conv2d(2, 4, (3, 2), stride=(2, 1), padding=(1, 2),
                           dilation=(2, 3)), (2, 2, 9, 7)),
        ("conv2d(6,3,padding=1,groups=3)",
         lambda: nn.Conv2d(3, 6, 3, padding=1, groups=3), (2, 3, 6, 5)),
        ("Conv2d(4,3,stride=2,padding=1,groups=4,bias=false)",
         lambda: nn.Conv2d(4, 4, 3, stride=2, padding=1, groups=4,
                           bias=False), (3, 4, 9, 7)),
        ("conv2d(6,1,groups=2)", lambda: nn.Conv2d(4, 6, 1, groups=2),
         (2, 4, 3, 5)),
        ("conv2d(8,3,groups=4,dilation=2,padding=1)",
         lambda: nn.Conv2d(8, 8, 3, groups=4, dilation=2, padding=1),
         (2, 8, 8, 7)),
        # 1-d pools
        ("maxpool1d(2)", lambda: nn.MaxPool1d(2), (2, 3, 9)),
        ("MaxPool1d(3,stride=2,padding=1)",
         lambda: nn.MaxPool1d(3, stride=2, padding=1), (2, 3, 10)),
        ("avgpool1d(2)", lambda: nn.AvgPool1d(2), (2, 3, 9)),
        ("avgpool1d(3,2,1)", lambda: nn.AvgPool1d(3, 2, 1), (2, 3, 10)),
        # adaptive pools: uniform, uneven (overlapping) bins, global
        ("adaptiveavgpool1d(1)", lambda: nn.AdaptiveAvgPool1d(1), (2, 3, 7)),
        ("adaptiveavgpool1d(3)", lambda: nn.AdaptiveAvgPool1d(3), (2, 3, 9)),
        ("AdaptiveAvgPool1d(4)", lambda: nn.AdaptiveAvgPool1d(4), (2, 3, 10)),
        ("adaptiveavgpool1d(5)", lambda: nn.AdaptiveAvgPool1d(5), (2, 2, 7)),
        ("adaptiveavgpool2d(1)", lambda: nn.AdaptiveAvgPool2d(1),
         (2, 3, 5, 7)),
        ("adaptiveavgpool2d(2)", lambda: nn.AdaptiveAvgPool2d(2),
         (2, 3, 6, 4)),
        ("AdaptiveAvgPool2d((3,2))", lambda: nn.AdaptiveAvgPool2d((3, 2)),
         (2, 3, 7, 5)),
        ("adaptiveavgpool2d(output_size=(4,3))",
         lambda: nn.AdaptiveAvgPool2d((4, 3)), (1, 2, 5, 5)),
    ]
    for k, (text, make, shape) in enumerate(cases):
        torch.manual_seed(100 + k)
        case(text, make(), shape, 200 + k)


main()

#!/usr/bin/python3
"""Reference iterates of torch.optim.SGD on the Rosenbrock function.

Run with Debian's torch (python3-torch 1.13):

    /usr/bin/python3 tests/torch/sgd_reference.py > tests/data/sgd_rosenbrock.ref

Each case is written as

    case NAME n N options "KEY=VALUE ..."   (loopkit's [sgd] options)
    loss STEP VALUE                         (the closure's loss, before step STEP)
    param x[I] VALUE                        (the parameters after the last step)

with %.17g numbers, so that tests/test_sgd_torch.c can compare loopkit's
run with torch's to 1e-12 relative without torch installed.
"""
import sys

import torch

STEPS = 60
X0 = (-1.2, 1.0)

# (name, SGD keyword arguments); lr is always given because torch requires it.
CASES = [
    ("plain", dict(lr=0.001)),
    ("momentum", dict(lr=0.001, momentum=0.9)),
    ("nesterov", dict(lr=0.001, momentum=0.9, nesterov=True)),
    ("weight_decay", dict(lr=0.001, momentum=0.9, weight_decay=0.1)),
    ("dampening", dict(lr=0.001, momentum=0.9, dampening=0.5)),
    ("mixed", dict(lr=0.0005, momentum=0.5, weight_decay=0.01,
                   maximize=False)),
]


def rosenbrock(x):
    # The expression plugins/model/rosenbrock.c mirrors operation by operation.
    # Each slice is taken once, so that every gradient element is a sum of
    # at most two terms (whose order does not matter).
    a, b = x[:-1], x[1:]
    return (100.0 * (b - a ** 2) ** 2 + (1 - a) ** 2).sum()


def option_text(kwargs):
    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        return repr(v)

    return " ".join("%s=%s" % (k, value(v)) for k, v in kwargs.items())


def run(out, name, n, kwargs):
    x = torch.tensor([X0[i % len(X0)] for i in range(n)], dtype=torch.float64,
                     requires_grad=True)
    opt = torch.optim.SGD([x], **kwargs)

    def closure():
        opt.zero_grad()
        f = rosenbrock(x)
        f.backward()
        return f

    out.write('case %s n %d options "%s"\n' % (name, n, option_text(kwargs)))
    for step in range(1, STEPS + 1):
        loss = opt.step(closure)
        out.write("loss %d %.17g\n" % (step, loss.item()))
    for i, v in enumerate(x.detach().tolist()):
        out.write("param x[%d] %.17g\n" % (i, v))


def main():
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    for n in (2, 10):
        for name, kwargs in CASES:
            run(sys.stdout, name, n, kwargs)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""The defaults of torch.optim's optimizers and schedulers, as their
constructors declare them.

Run with Debian's torch (python3-torch 1.13):

    /usr/bin/python3 tests/torch/defaults_reference.py > tests/data/torch_defaults.ref

One line per constructor argument, CLASS ARGUMENT DEFAULT:

    SGD lr required
    SGD momentum 0
    Adam betas 0.90000000000000002,0.999

DEFAULT is "required" for an argument without a default (torch's
`required` sentinel included), "None", true or false, a number as %.17g, a
tuple as a comma list of them, or a string. The first arguments (params,
optimizer) and the ones that pick an implementation or a logging mode
rather than the algorithm (foreach, fused, capturable, differentiable,
verbose, last_epoch) are left out. tests/cli/defaults.sh holds every
bundled plugin's declared defaults against these lines.
"""
import inspect

import torch
from torch.optim import lr_scheduler
from torch.optim.optimizer import required

SKIP = {"self", "params", "optimizer", "foreach", "fused", "capturable",
        "differentiable", "verbose", "last_epoch"}


def text(v):
    if v is inspect.Parameter.empty or v is required:
        return "required"
    if v is None:
        return "None"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return "%.17g" % v
    if isinstance(v, (tuple, list)):
        return ",".join(text(x) for x in v)
    return str(v)


def classes(module, base):
    for name, cls in sorted(vars(module).items()):
        if (inspect.isclass(cls) and issubclass(cls, base) and cls is not base
                and not name.startswith("_")):
            yield name, cls


def main():
    print("# torch %s: constructor defaults (tests/torch/defaults_reference.py)"
          % torch.__version__)
    found = list(classes(torch.optim, torch.optim.Optimizer))
    found += list(classes(lr_scheduler, lr_scheduler._LRScheduler))
    found.append(("ReduceLROnPlateau", lr_scheduler.ReduceLROnPlateau))
    for name, cls in found:
        for p in inspect.signature(cls.__init__).parameters.values():
            if p.name in SKIP or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            print(name, p.name, text(p.default))


main()

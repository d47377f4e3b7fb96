#!/usr/bin/python3
"""Reference learning rates and iterates of torch.optim.lr_scheduler.

Run with Debian's torch (python3-torch 1.13):

    /usr/bin/python3 tests/torch/scheduler_reference.py > tests/data/schedulers.ref

StepLR, CosineAnnealingLR, LinearLR and ReduceLROnPlateau drive
torch.optim.SGD (and Adam in two cases, foreach=False) on Rosenbrock n=2
(x0 = -1.2,1), Rosenbrock n=100 (x0 = -1.2,1 cycled) and least squares
(m=20, n=5: two parameter tensors), in f64, for STEPS steps. The scheduler
steps after every optimizer step, as loopkit's with interval = step does:
scheduler.step(), or scheduler.step(loss) with that step's closure loss for
ReduceLROnPlateau (loopkit: monitor = loss).

The closure computes the loss and the gradient with the same floating-point
operations, in the same order, as loopkit's rosenbrock and lstsq plugins
(the mirrors are those of first_order_reference.py), checked against
autograd at every step, so that only the optimizer and the scheduler are
compared.

Each case is written as

    case NAME problem "PROBLEM" optimizer OPT "KEY=VALUE ..." scheduler SCHED "KEY=VALUE ..."
    lr STEP VALUE        (the learning rate optimizer step STEP uses)
    loss STEP VALUE      (the closure's loss in optimizer step STEP)
    param NAME[I] VALUE  (the parameters after the last step)

with %.17g numbers. PROBLEM is loopkit's options of the problem's plugin
("rosenbrock n=2", "lstsq m=20 n=5"); the option lists are loopkit's
[OPT] and [SCHED] options (the scheduler's with interval=step; unnamed ones
keep their defaults, which are torch's).
"""
import math
import sys

import torch
from torch.optim import lr_scheduler

STEPS = 60

# loopkit's scheduler name, torch's class, and cases (name, keyword
# arguments) that between them give every option a non-default value.
SCHEDULERS = [
    ("step_lr", lr_scheduler.StepLR, [
        ("defaults", dict(step_size=10)),
        ("gamma", dict(step_size=7, gamma=0.5)),
        ("every_step", dict(step_size=1, gamma=0.95)),
    ]),
    ("cosine", lr_scheduler.CosineAnnealingLR, [
        ("defaults", dict(T_max=60)),
        ("eta_min", dict(T_max=50, eta_min=0.0001)),
        # Past T_max the rate climbs back: torch's other recursive branch.
        ("restart", dict(T_max=7, eta_min=0.00005)),
    ]),
    ("linear_warmup", lr_scheduler.LinearLR, [
        ("defaults", dict()),
        ("long", dict(start_factor=0.1, total_iters=20)),
        ("decay", dict(start_factor=0.9, end_factor=0.2, total_iters=30)),
        ("to_zero", dict(start_factor=1.0, end_factor=0.0, total_iters=80)),
    ]),
    ("reduce_on_plateau", lr_scheduler.ReduceLROnPlateau, [
        ("defaults", dict()),
        ("patience", dict(factor=0.5, patience=2, threshold=0.01)),
        ("cooldown", dict(factor=0.5, patience=1, threshold=0.01,
                          cooldown=3, min_lr=0.0002)),
        ("abs", dict(threshold_mode="abs", threshold=0.002, patience=0,
                     factor=0.3, eps=1e-5)),
        ("max", dict(mode="max", threshold=0.5, patience=4, factor=0.7)),
        ("max_abs", dict(mode="max", threshold_mode="abs", threshold=-0.01,
                         patience=3, factor=0.5, cooldown=2)),
    ]),
]

# (problem, its options, the optimizer's settings on it)
PROBLEMS = [
    ("rosenbrock", dict(n=2), dict(lr=0.001, momentum=0.9)),
    ("rosenbrock", dict(n=100), dict(lr=0.0005, momentum=0.5)),
    ("lstsq", dict(m=20, n=5), dict(lr=0.1, momentum=0.5)),
]

# Adam with a scheduler: (problem index, scheduler, case, Adam's settings).
ADAM_CASES = [
    (2, "cosine", "eta_min", dict(lr=0.05)),
    (0, "reduce_on_plateau", "patience", dict(lr=0.02, betas=(0.8, 0.95))),
]


class Rosenbrock:
    """plugins/model/rosenbrock.c, operation by operation."""

    names = ["x"]

    def __init__(self, n, x0=(-1.2, 1.0)):
        self.n = n
        self.x = torch.tensor([x0[i % len(x0)] for i in range(n)],
                              dtype=torch.float64, requires_grad=True)
        self.params = [self.x]

    def evaluate(self):
        x = self.x.detach().tolist()
        n = self.n
        f = 0.0
        for i in range(n - 1):
            d = x[i + 1] - x[i] * x[i]
            e = 1 - x[i]
            f += 100.0 * (d * d) + e * e
        g = []
        carry = 0.0
        for i in range(n):
            if i + 1 < n:
                d = x[i + 1] - x[i] * x[i]
                e = 1 - x[i]
                gd = 100.0 * (2 * d)
                own = -gd * (2 * x[i]) + -(2 * e)
                g.append(0.0 + 1.0 * (own + carry))
                carry = gd
            else:
                g.append(0.0 + 1.0 * carry)
        return f, [g]

    def autograd(self):
        x = self.x.detach().clone().requires_grad_(True)
        a, b = x[:-1], x[1:]
        f = (100.0 * (b - a ** 2) ** 2 + (1 - a) ** 2).sum()
        f.backward()
        return f.item(), [x.grad.tolist()]


class Lstsq:
    """plugins/model/lstsq.c: mean((A x + b - y)^2), A[i][j] = sin(1 + i*n + j),
    y[i] = cos(1 + i), x and b starting at 0."""

    names = ["x", "b"]

    def __init__(self, m, n):
        self.m, self.n = m, n
        self.a = [[math.sin(1.0 + float(i * n + j)) for j in range(n)]
                  for i in range(m)]
        self.y = [math.cos(1.0 + float(i)) for i in range(m)]
        self.x = torch.zeros(n, dtype=torch.float64, requires_grad=True)
        self.b = torch.zeros(1, dtype=torch.float64, requires_grad=True)
        self.params = [self.x, self.b]

    def evaluate(self):
        x, b = self.x.detach().tolist(), self.b.item()
        r, loss = [], 0.0
        for i in range(self.m):
            s = 0.0
            for j in range(self.n):
                s += self.a[i][j] * x[j]
            r.append((s + b) - self.y[i])
            loss += r[i] * r[i]
        k = 1.0 * 2.0 / float(self.m)
        gx = []
        for j in range(self.n):
            g = 0.0
            for i in range(self.m):
                g += self.a[i][j] * r[i]
            gx.append(0.0 + k * g)
        gb = 0.0
        for i in range(self.m):
            gb += r[i]
        return loss / float(self.m), [gx, [0.0 + k * gb]]

    def autograd(self):
        x = self.x.detach().clone().requires_grad_(True)
        b = self.b.detach().clone().requires_grad_(True)
        a = torch.tensor(self.a, dtype=torch.float64)
        y = torch.tensor(self.y, dtype=torch.float64)
        f = ((a @ x + b - y) ** 2).mean()
        f.backward()
        return f.item(), [x.grad.tolist(), b.grad.tolist()]


def make_problem(name, opts):
    return Rosenbrock(opts["n"]) if name == "rosenbrock" else Lstsq(**opts)


def check_close(what, a, b, scale=0.0):
    # Sums of terms that cancel carry an absolute error of the order of the
    # largest term's rounding whatever their order.
    if abs(a - b) > 1e-12 * max(abs(a), abs(b), scale) + 1e-14:
        raise SystemExit("mirror and autograd differ in %s: %r %r" %
                         (what, a, b))


def option_text(kwargs):
    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, tuple):
            return ",".join(repr(u) for u in v)
        return repr(v) if not isinstance(v, str) else v

    return " ".join("%s=%s" % (k, value(v)) for k, v in kwargs.items())


def run(out, name, problem_name, problem_opts, opt_name, opt_kwargs,
        sched_name, sched_class, sched_kwargs):
    prob = make_problem(problem_name, problem_opts)
    opt_class = torch.optim.SGD if opt_name == "sgd" else torch.optim.Adam
    opt = opt_class(prob.params, foreach=False, **opt_kwargs)
    sched = sched_class(opt, **sched_kwargs)
    plateau = sched_class is lr_scheduler.ReduceLROnPlateau
    losses = []

    def closure():
        opt.zero_grad()
        loss, grads = prob.evaluate()
        f, ag = prob.autograd()  # the mirror is the function autograd sees
        check_close("loss", loss, f)
        scale = max(abs(u) for g in grads for u in g)
        for g, h in zip(grads, ag):
            for u, v in zip(g, h):  # relative to the largest element
                check_close("gradient", u, v, scale)
        for p, g in zip(prob.params, grads):
            p.grad = torch.tensor(g, dtype=torch.float64)
        losses.append(loss)
        return torch.tensor(loss, dtype=torch.float64)

    loopkit_sched = dict(interval="step")
    if plateau:
        loopkit_sched["monitor"] = "loss"
    loopkit_sched.update(sched_kwargs)
    out.write('case %s problem "%s %s" optimizer %s "%s" scheduler %s "%s"\n'
              % (name, problem_name,
                 " ".join("%s=%d" % kv for kv in problem_opts.items()),
                 opt_name, option_text(opt_kwargs), sched_name,
                 option_text(loopkit_sched)))
    rates = []
    for step in range(1, STEPS + 1):
        lr = opt.param_groups[0]["lr"]
        rates.append(lr)
        opt.step(closure)
        if plateau:
            sched.step(losses[-1])
        else:
            sched.step()
        out.write("lr %d %.17g\n" % (step, lr))
        out.write("loss %d %.17g\n" % (step, losses[-1]))
    sys.stderr.write("%s %s %s: %d rates\n" % (name, problem_name,
                     problem_opts, len(set(rates))))
    for pname, p in zip(prob.names, prob.params):
        for i, v in enumerate(p.detach().tolist()):
            if not math.isfinite(v):
                raise SystemExit("%s: non-finite parameter" % name)
            out.write("param %s[%d] %.17g\n" % (pname, i, v))


def main():
    torch.set_num_threads(1)
    for sched_name, sched_class, cases in SCHEDULERS:
        for problem_name, problem_opts, opt_kwargs in PROBLEMS:
            for case, kwargs in cases:
                run(sys.stdout, "%s_%s" % (sched_name, case), problem_name,
                    problem_opts, "sgd", opt_kwargs, sched_name, sched_class,
                    kwargs)
    table = {name: (cls, dict(cases)) for name, cls, cases in SCHEDULERS}
    for problem, sched_name, case, adam_kwargs in ADAM_CASES:
        problem_name, problem_opts, _ = PROBLEMS[problem]
        cls, cases = table[sched_name]
        run(sys.stdout, "adam_%s_%s" % (sched_name, case), problem_name,
            problem_opts, "adam", adam_kwargs, sched_name, cls, cases[case])


if __name__ == "__main__":
    main()

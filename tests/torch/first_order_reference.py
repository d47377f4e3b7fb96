#!/usr/bin/python3
"""Reference iterates of torch.optim's Adam, AdamW, RMSprop and Adagrad.

Run with Debian's torch (python3-torch 1.13):

    /usr/bin/python3 tests/torch/first_order_reference.py > tests/data/first_order.ref

Every optimizer runs with foreach=False (torch's _single_tensor_* code, the
one loopkit's plugins mirror) on Rosenbrock n=2 (x0 = -1.2,1), Rosenbrock
n=100 (x0 = -1.2,1 cycled) and least squares (m=20, n=5: two parameter
tensors), in f64, for STEPS steps of opt.step(closure).

The closure computes the loss and the gradient with the same floating-point
operations, in the same order, as loopkit's rosenbrock and lstsq plugins (in
Python floats, which are IEEE doubles), so that only the optimizer is
compared. Autograd's sums go in other orders: the script checks at every
step that its loss and gradient agree with the mirror's to 1e-12 relative.

Each case is written as

    case NAME optimizer OPT problem "PROBLEM" options "KEY=VALUE ..."
    loss STEP VALUE            (the closure's loss in optimizer step STEP)
    param NAME[I] VALUE        (the parameters after the last step)

with %.17g numbers. PROBLEM is loopkit's options of the problem's plugin
("rosenbrock n=2", "lstsq m=20 n=5"); options are loopkit's [OPT] options
(empty: every default, which are torch's).
"""
import math
import sys

import torch

STEPS = 60

# (optimizer, torch class, [(case name, keyword arguments)]). Between them
# the cases give every option a value other than its default.
SETTINGS = [
    ("adam", torch.optim.Adam, [
        ("defaults", {}),
        ("lr_betas", dict(lr=0.02, betas=(0.8, 0.95))),
        ("eps_weight_decay", dict(lr=0.01, eps=1e-3, weight_decay=0.1)),
        ("amsgrad", dict(lr=0.01, amsgrad=True)),
        ("maximize", dict(maximize=True)),
        ("mixed", dict(lr=0.005, betas=(0.85, 0.9), eps=1e-6,
                       weight_decay=0.05, amsgrad=True)),
    ]),
    ("adamw", torch.optim.AdamW, [
        ("defaults", {}),
        ("lr_betas", dict(lr=0.02, betas=(0.8, 0.95))),
        ("eps_weight_decay", dict(lr=0.01, eps=1e-3, weight_decay=0.1)),
        ("no_weight_decay", dict(lr=0.01, weight_decay=0.0)),
        ("amsgrad", dict(lr=0.01, amsgrad=True)),
        ("maximize", dict(maximize=True)),
        ("mixed", dict(lr=0.005, betas=(0.85, 0.9), eps=1e-6,
                       weight_decay=0.5, amsgrad=True)),
    ]),
    ("rmsprop", torch.optim.RMSprop, [
        ("defaults", {}),
        ("alpha", dict(lr=0.005, alpha=0.9)),
        ("eps_weight_decay", dict(eps=1e-4, weight_decay=0.1)),
        ("momentum", dict(lr=0.001, momentum=0.9)),
        ("centered", dict(centered=True)),
        ("centered_momentum", dict(lr=0.002, alpha=0.95, momentum=0.5,
                                   centered=True, weight_decay=0.01)),
        ("maximize", dict(lr=0.001, maximize=True)),
    ]),
    ("adagrad", torch.optim.Adagrad, [
        ("defaults", {}),
        ("lr_decay", dict(lr=0.1, lr_decay=0.01)),
        ("weight_decay", dict(weight_decay=0.1)),
        ("initial_accumulator", dict(lr=0.05, initial_accumulator_value=0.5)),
        ("eps", dict(eps=1e-3)),
        ("maximize", dict(maximize=True)),
        ("mixed", dict(lr=0.05, lr_decay=0.1, weight_decay=0.01,
                       initial_accumulator_value=0.1, eps=1e-6)),
    ]),
]

PROBLEMS = [("rosenbrock", dict(n=2)), ("rosenbrock", dict(n=100)),
            ("lstsq", dict(m=20, n=5))]


class Rosenbrock:
    """plugins/rosenbrock.c, operation by operation."""

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
    """plugins/lstsq.c: mean((A x + b - y)^2), A[i][j] = sin(1 + i*n + j),
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
        return repr(v)

    return " ".join("%s=%s" % (k, value(v)) for k, v in kwargs.items())


def run(out, opt_name, opt_class, name, problem_name, problem_opts, kwargs):
    prob = make_problem(problem_name, problem_opts)
    opt = opt_class(prob.params, foreach=False, **kwargs)
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

    out.write('case %s optimizer %s problem "%s %s" options "%s"\n' %
              (name, opt_name, problem_name,
               " ".join("%s=%d" % kv for kv in problem_opts.items()),
               option_text(kwargs)))
    for step in range(1, STEPS + 1):
        opt.step(closure)
        out.write("loss %d %.17g\n" % (step, losses[-1]))
    for pname, p in zip(prob.names, prob.params):
        for i, v in enumerate(p.detach().tolist()):
            if not math.isfinite(v):
                raise SystemExit("%s %s: non-finite parameter" %
                                 (opt_name, name))
            out.write("param %s[%d] %.17g\n" % (pname, i, v))


def main():
    torch.set_num_threads(1)
    for opt_name, opt_class, cases in SETTINGS:
        for problem_name, problem_opts in PROBLEMS:
            for name, kwargs in cases:
                run(sys.stdout, opt_name, opt_class, name, problem_name,
                    problem_opts, kwargs)


if __name__ == "__main__":
    main()

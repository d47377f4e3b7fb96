#!/usr/bin/python3
"""Reference iterates of torch.optim.LBFGS on Rosenbrock and least squares.

Run with Debian's torch (python3-torch 1.13):

    /usr/bin/python3 tests/torch/lbfgs_reference.py > tests/data/lbfgs.ref

The closure evaluates the loss and the gradient with the same floating-point
operations, in the same order, as loopkit's rosenbrock and lstsq plugins (in
Python floats, which are IEEE doubles), so that the only thing compared is
the optimizer: torch's LBFGS with its own dot products, sums and line search.
(Autograd sums in other orders; the script checks that its loss and
gradient agree with the mirror's to 1e-12 relative, 1e-14 absolute.)

Each case is written as

    case NAME problem PROBLEM options "KEY=VALUE ..."  (loopkit's options)
    step STEP loss VALUE evals CALLS   (the last closure call's loss in
                                        optimizer step STEP, as loopkit's
                                        metrics.csv logs it, and the number
                                        of closure calls in that step)
    param NAME[I] VALUE                (the parameters after the last step)
    state n_iter N func_evals N        (torch's counters at the end)

with %.17g numbers. PROBLEM is "rosenbrock n=N" or "lstsq m=M n=N" (the
options of loopkit's plugin). Every case runs STEPS optimizer steps, also
after torch has converged (a converged step calls the closure once and
returns).
"""
import math
import sys

import torch

STEPS = 50

# (name, LBFGS keyword arguments)
SETTINGS = [
    ("defaults", {}),
    ("strong_wolfe", dict(line_search_fn="strong_wolfe")),
    ("history5", dict(history_size=5)),
    ("history5_wolfe", dict(history_size=5, line_search_fn="strong_wolfe")),
    ("max_iter5_eval7", dict(max_iter=5, max_eval=7)),
    ("max_iter5_eval7_wolfe", dict(max_iter=5, max_eval=7,
                                   line_search_fn="strong_wolfe")),
    ("max_iter8", dict(max_iter=8)),  # max_eval defaults to 8 * 5 // 4
    ("lr05", dict(lr=0.5)),
    ("lr05_wolfe", dict(lr=0.5, line_search_fn="strong_wolfe")),
    ("tolerances", dict(tolerance_grad=1e-5, tolerance_change=1e-6)),
    ("tolerances_wolfe", dict(tolerance_grad=1e-4, tolerance_change=1e-5,
                              line_search_fn="strong_wolfe")),
]

PROBLEMS = [("rosenbrock", dict(n=2)), ("rosenbrock", dict(n=100)),
            ("lstsq", dict(m=20, n=5))]


class Rosenbrock:
    """plugins/model/rosenbrock.c, operation by operation."""

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
    # Sums of terms of order 1 that cancel (lstsq's gradient at 0 is about
    # 1e-6) carry an absolute error of order 1e-16 whatever their order.
    if abs(a - b) > 1e-12 * max(abs(a), abs(b), scale) + 1e-14:
        raise SystemExit("mirror and autograd differ in %s: %r %r" % (what, a, b))


def option_text(kwargs):
    return " ".join("%s=%s" % (k, v) for k, v in kwargs.items())


def run(out, name, problem_name, problem_opts, kwargs):
    prob = make_problem(problem_name, problem_opts)
    opt = torch.optim.LBFGS(prob.params, **kwargs)
    calls = [0]
    last = [None]

    def closure():
        opt.zero_grad()
        loss, grads = prob.evaluate()
        if calls[0] == 0:  # the mirror is the function autograd sees
            f, ag = prob.autograd()
            check_close("loss", loss, f)
            scale = max(abs(u) for g in grads for u in g)
            for g, h in zip(grads, ag):
                for u, v in zip(g, h):  # relative to the largest element
                    check_close("gradient", u, v, scale)
        for p, g in zip(prob.params, grads):
            p.grad = torch.tensor(g, dtype=torch.float64)
        calls[0] += 1
        last[0] = loss
        return torch.tensor(loss, dtype=torch.float64)

    out.write('case %s problem %s %s options "%s"\n' %
              (name, problem_name,
               " ".join("%s=%d" % kv for kv in problem_opts.items()),
               option_text(kwargs)))
    for step in range(1, STEPS + 1):
        calls[0] = 0
        opt.step(closure)
        out.write("step %d loss %.17g evals %d\n" % (step, last[0], calls[0]))
    names = ["x"] if problem_name == "rosenbrock" else ["x", "b"]
    for pname, p in zip(names, prob.params):
        for i, v in enumerate(p.detach().tolist()):
            out.write("param %s[%d] %.17g\n" % (pname, i, v))
    state = opt.state[prob.params[0]]
    out.write("state n_iter %d func_evals %d\n" %
              (state["n_iter"], state["func_evals"]))


def main():
    torch.set_num_threads(1)
    for problem_name, problem_opts in PROBLEMS:
        for name, kwargs in SETTINGS:
            run(sys.stdout, name, problem_name, problem_opts, kwargs)


if __name__ == "__main__":
    main()

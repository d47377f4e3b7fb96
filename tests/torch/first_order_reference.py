#!/usr/bin/python3
"""Reference iterates of torch.optim's first-order optimizers: SGD (with
its momentum changed during the run), Adam, AdamW, RMSprop, Adagrad,
Adadelta, Adamax, ASGD, NAdam, RAdam and Rprop.

Run with Debian's torch (python3-torch 1.13):

    /usr/bin/python3 tests/torch/first_order_reference.py > tests/data/first_order.ref

Every optimizer runs with foreach=False (torch's _single_tensor_* code, the
one loopkit's plugins mirror) on Rosenbrock n=2 (x0 = -1.2,1), Rosenbrock
n=100 (x0 = -1.2,1 cycled) and least squares (m=20, n=5: two parameter
tensors) in f64, and on Rosenbrock n=2 and least squares in f32, for STEPS
steps of opt.step(closure).

The closure computes the loss and the gradient with the same floating-point
operations, in the same order, as loopkit's rosenbrock and lstsq plugins (in
Python floats, which are IEEE doubles, or numpy float32 for Rosenbrock in
f32), so that only the optimizer is compared. Autograd's sums go in other
orders: the script checks at every step that its loss and gradient agree
with the mirror's (to 1e-12 relative in f64, to 1e-4 in f32, where it
compares the f32 mirror with the f64 one).

A case with a schedule changes the momentum during the run as loopkit's
test scheduler momsched does (tests/plugins/momsched.c): before step k
(from 1) it is schedule[(k - 1) mod len], group['momentum'] for SGD and
RMSprop, group['betas'][0] for the others, as torch's OneCycleLR sets it;
after the last step it is schedule[STEPS mod len] (the state written).

Each case is written as

    case NAME optimizer OPT problem "PROBLEM" options "KEY=VALUE ..."
    [schedule "V,V,..."]
    loss STEP VALUE            (the closure's loss in optimizer step STEP)
    param NAME[I] VALUE        (the parameters after the last step)
    state NAME[I] VALUE        (the optimizer's state after the last step,
                                named as loopkit's host state: OPT.KEY for
                                a scalar, OPT.KEY.PARAM for a tensor)

with %.17g numbers (f32 values as the doubles they convert to). PROBLEM is
loopkit's options of the problem's plugin ("rosenbrock n=2", "lstsq m=20
n=5 dtype=f32"); options are loopkit's [OPT] options (empty: every default,
which are torch's). The state is written for the problems of at most
MAX_STATE parameters; it is torch's state dict (torch's key names, which
loopkit's plugins use) and the group's lr and momentum (or beta1), which
loopkit keeps as state too.
"""
import math
import sys

import numpy as np
import torch

STEPS = 60
MAX_STATE = 10
F32 = np.float32

# (optimizer, torch class, [(case name, keyword arguments[, schedule])]).
# Between them the cases give every option a value other than its default.
SETTINGS = [
    ("sgd", torch.optim.SGD, [
        ("momentum_schedule", dict(lr=0.001, momentum=0.9),
         [0.9, 0.5, 0.0, 0.95]),
        # torch creates the buffers at the first step with momentum != 0
        ("late_momentum", dict(lr=0.001, momentum=0.9, dampening=0.3),
         [0.0, 0.0, 0.9, 0.5, 0.0, 0.8]),
        ("nesterov_schedule", dict(lr=0.0005, momentum=0.9, nesterov=True,
                                   weight_decay=0.01), [0.9, 0.6, 0.0, 0.8]),
    ]),
    ("adam", torch.optim.Adam, [
        ("defaults", {}),
        ("lr_betas", dict(lr=0.02, betas=(0.8, 0.95))),
        ("eps_weight_decay", dict(lr=0.01, eps=1e-3, weight_decay=0.1)),
        ("amsgrad", dict(lr=0.01, amsgrad=True)),
        ("maximize", dict(maximize=True)),
        ("mixed", dict(lr=0.005, betas=(0.85, 0.9), eps=1e-6,
                       weight_decay=0.05, amsgrad=True)),
        ("beta1_schedule", dict(lr=0.01), [0.9, 0.5, 0.0, 0.95]),
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
        ("beta1_schedule", dict(lr=0.01, amsgrad=True), [0.85, 0.95, 0.6]),
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
        ("momentum_schedule", dict(lr=0.001, momentum=0.9),
         [0.9, 0.5, 0.0, 0.7]),
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
    ("adadelta", torch.optim.Adadelta, [
        ("defaults", {}),
        ("rho_eps", dict(lr=0.5, rho=0.95, eps=1e-4)),
        ("weight_decay", dict(weight_decay=0.1)),
        ("maximize", dict(maximize=True)),
        ("mixed", dict(lr=2.0, rho=0.8, eps=1e-5, weight_decay=0.01)),
    ]),
    ("adamax", torch.optim.Adamax, [
        ("defaults", {}),
        ("lr_betas", dict(lr=0.02, betas=(0.8, 0.95))),
        ("eps_weight_decay", dict(lr=0.01, eps=1e-3, weight_decay=0.1)),
        ("maximize", dict(maximize=True)),
        ("beta1_schedule", dict(lr=0.01), [0.9, 0.5, 0.0, 0.95]),
    ]),
    # Plain gradient steps: lr 0.01, the default, diverges on Rosenbrock.
    ("asgd", torch.optim.ASGD, [
        ("small_lr", dict(lr=0.001)),
        ("t0", dict(lr=0.001, t0=10.0)),
        ("lambd_alpha", dict(lr=0.0005, lambd=0.1, alpha=0.5, t0=5.0)),
        ("weight_decay", dict(lr=0.001, weight_decay=0.1, t0=20.0)),
        ("maximize", dict(lr=1e-06, maximize=True)),
    ]),
    ("nadam", torch.optim.NAdam, [
        ("defaults", {}),
        ("lr_betas", dict(lr=0.02, betas=(0.8, 0.95))),
        ("eps_weight_decay", dict(lr=0.01, eps=1e-3, weight_decay=0.1)),
        ("momentum_decay", dict(lr=0.01, momentum_decay=0.1)),
        ("beta1_schedule", dict(lr=0.01), [0.9, 0.5, 0.0, 0.95]),
    ]),
    # Its first steps (rho_t <= 5) are plain momentum steps of lr: small
    # ones, or Rosenbrock n=100 diverges.
    ("radam", torch.optim.RAdam, [
        ("defaults", {}),
        ("lr_betas", dict(lr=0.0005, betas=(0.8, 0.95))),
        ("eps_weight_decay", dict(lr=0.0005, eps=1e-3, weight_decay=0.1)),
        ("beta1_schedule", dict(lr=0.001), [0.9, 0.5, 0.0, 0.95]),
    ]),
    ("rprop", torch.optim.Rprop, [
        ("defaults", {}),
        ("etas", dict(etas=(0.3, 1.5))),
        ("step_sizes", dict(lr=0.1, step_sizes=(0.001, 0.05))),
        ("maximize", dict(maximize=True)),
        ("mixed", dict(lr=0.05, etas=(0.6, 1.1), step_sizes=(1e-4, 1.0))),
    ]),
]

PROBLEMS = [("rosenbrock", dict(n=2)), ("rosenbrock", dict(n=100)),
            ("lstsq", dict(m=20, n=5)),
            ("rosenbrock", dict(n=2, dtype="f32")),
            ("lstsq", dict(m=20, n=5, dtype="f32"))]

# The state loopkit keeps that torch keeps in the group: what momsched sets.
MOMENTUM_STATE = {"sgd": ("momentum", None), "rmsprop": ("momentum", None),
                  "adam": ("beta1", 0), "adamw": ("beta1", 0),
                  "adamax": ("beta1", 0), "nadam": ("beta1", 0),
                  "radam": ("beta1", 0)}


class Rosenbrock:
    """plugins/model/rosenbrock.c, operation by operation."""

    names = ["x"]

    def __init__(self, n, dtype="f64", x0=(-1.2, 1.0)):
        self.n = n
        self.f32 = dtype == "f32"
        self.x = torch.tensor([x0[i % len(x0)] for i in range(n)],
                              dtype=torch.float32 if self.f32 else
                              torch.float64, requires_grad=True)
        self.params = [self.x]

    def evaluate(self):
        return self.evaluate_f32() if self.f32 else self.evaluate_f64()

    def evaluate_f32(self):
        """loss_f32 and grad_f32, in numpy float32 (each operation rounded
        to float, as C's float arithmetic without contraction)."""
        x = [F32(v) for v in self.x.detach().tolist()]
        n = self.n
        one, two, hundred = F32(1), F32(2), F32(100)
        f = F32(0)
        for i in range(n - 1):
            d = x[i + 1] - x[i] * x[i]
            e = one - x[i]
            f = f + (hundred * (d * d) + e * e)
        g = []
        carry = F32(0)
        for i in range(n):
            if i + 1 < n:
                d = x[i + 1] - x[i] * x[i]
                e = one - x[i]
                gd = hundred * (two * d)
                own = -gd * (two * x[i]) + -(two * e)
                g.append(F32(0) + one * (own + carry))
                carry = gd
            else:
                g.append(F32(0) + one * carry)
        return float(f), [[float(v) for v in g]]

    def evaluate_f64(self):
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
        x = self.x.detach().double().clone().requires_grad_(True)
        a, b = x[:-1], x[1:]
        f = (100.0 * (b - a ** 2) ** 2 + (1 - a) ** 2).sum()
        f.backward()
        return f.item(), [x.grad.tolist()]


class Lstsq:
    """plugins/model/lstsq.c: mean((A x + b - y)^2), A[i][j] = sin(1 + i*n + j),
    y[i] = cos(1 + i), x and b starting at 0. In f32, A and y are rounded
    to float, the arithmetic is the same (in double), and each gradient is
    rounded to float as it is added to the zeroed one."""

    names = ["x", "b"]

    def __init__(self, m, n, dtype="f64"):
        self.m, self.n = m, n
        self.f32 = dtype == "f32"
        r = (lambda v: float(F32(v))) if self.f32 else (lambda v: v)
        self.a = [[r(math.sin(1.0 + float(i * n + j))) for j in range(n)]
                  for i in range(m)]
        self.y = [r(math.cos(1.0 + float(i))) for i in range(m)]
        dt = torch.float32 if self.f32 else torch.float64
        self.x = torch.zeros(n, dtype=dt, requires_grad=True)
        self.b = torch.zeros(1, dtype=dt, requires_grad=True)
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
        gb = [0.0 + k * gb]
        if self.f32:
            gx = [float(F32(0) + F32(v)) for v in gx]
            gb = [float(F32(0) + F32(v)) for v in gb]
        return loss / float(self.m), [gx, gb]

    def autograd(self):
        x = self.x.detach().double().clone().requires_grad_(True)
        b = self.b.detach().double().clone().requires_grad_(True)
        a = torch.tensor(self.a, dtype=torch.float64)
        y = torch.tensor(self.y, dtype=torch.float64)
        f = ((a @ x + b - y) ** 2).mean()
        f.backward()
        return f.item(), [x.grad.tolist(), b.grad.tolist()]


def make_problem(name, opts):
    return Rosenbrock(**opts) if name == "rosenbrock" else Lstsq(**opts)


def check_close(what, a, b, scale=0.0, tol=1e-12):
    # Sums of terms that cancel carry an absolute error of the order of the
    # largest term's rounding whatever their order.
    if abs(a - b) > tol * max(abs(a), abs(b), scale) + tol * 1e-2:
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


def set_momentum(opt_name, group, value):
    key, index = MOMENTUM_STATE[opt_name]
    if index is None:
        group["momentum"] = value
    else:
        group["betas"] = (value,) + tuple(group["betas"][1:])


def state_lines(opt_name, opt, prob):
    """The optimizer's state after the run, named as loopkit's."""
    group = opt.param_groups[0]
    out = [("%s.lr" % opt_name, [group["lr"]])]
    if opt_name in MOMENTUM_STATE:
        key, index = MOMENTUM_STATE[opt_name]
        v = group["momentum"] if index is None else group["betas"][index]
        out.append(("%s.%s" % (opt_name, key), [v]))
    first = opt.state[prob.params[0]]
    for key in first:
        if first[key] is None:
            continue
        if isinstance(first[key], torch.Tensor) and first[key].dim() > 0:
            for pname, p in zip(prob.names, prob.params):
                out.append(("%s.%s.%s" % (opt_name, key, pname),
                            opt.state[p][key].detach().tolist()))
        else:
            values = set(float(opt.state[p][key]) for p in prob.params)
            if len(values) != 1:
                raise SystemExit("%s: state %s differs between parameters" %
                                 (opt_name, key))
            out.append(("%s.%s" % (opt_name, key), [values.pop()]))
    return out


def run(out, opt_name, opt_class, name, problem_name, problem_opts, kwargs,
        schedule):
    prob = make_problem(problem_name, problem_opts)
    opt = opt_class(prob.params, foreach=False, **kwargs)
    losses = []

    def closure():
        opt.zero_grad()
        loss, grads = prob.evaluate()
        f, ag = prob.autograd()  # the mirror is the function autograd sees
        tol = 1e-4 if prob.f32 else 1e-12
        check_close("loss", loss, f, tol=tol)
        scale = max(abs(u) for g in ag for u in g)
        for g, h in zip(grads, ag):
            for u, v in zip(g, h):  # relative to the largest element
                check_close("gradient", u, v, scale, tol=tol)
        for p, g in zip(prob.params, grads):
            p.grad = torch.tensor(g, dtype=p.dtype)
            if p.grad.tolist() != g:
                raise SystemExit("gradient not exact in the parameter's type")
        losses.append(loss)
        return torch.tensor(loss, dtype=torch.float64)

    out.write('case %s optimizer %s problem "%s %s" options "%s"%s\n' %
              (name, opt_name, problem_name,
               " ".join("%s=%s" % kv for kv in problem_opts.items()),
               option_text(kwargs),
               ' schedule "%s"' % ",".join(repr(v) for v in schedule)
               if schedule else ""))
    for step in range(1, STEPS + 1):
        if schedule:
            set_momentum(opt_name, opt.param_groups[0],
                         schedule[(step - 1) % len(schedule)])
        opt.step(closure)
        out.write("loss %d %.17g\n" % (step, losses[-1]))
    if schedule:  # what momsched sets after the last step
        set_momentum(opt_name, opt.param_groups[0],
                     schedule[STEPS % len(schedule)])
    for pname, p in zip(prob.names, prob.params):
        for i, v in enumerate(p.detach().tolist()):
            if not math.isfinite(v):
                raise SystemExit("%s %s: non-finite parameter" %
                                 (opt_name, name))
            out.write("param %s[%d] %.17g\n" % (pname, i, v))
    if sum(p.numel() for p in prob.params) <= MAX_STATE:
        for sname, values in state_lines(opt_name, opt, prob):
            for i, v in enumerate(values):
                out.write("state %s[%d] %.17g\n" % (sname, i, v))


def main():
    torch.set_num_threads(1)
    for opt_name, opt_class, cases in SETTINGS:
        for problem_name, problem_opts in PROBLEMS:
            for case in cases:
                name, kwargs = case[0], case[1]
                schedule = case[2] if len(case) > 2 else None
                run(sys.stdout, opt_name, opt_class, name, problem_name,
                    problem_opts, kwargs, schedule)


if __name__ == "__main__":
    main()

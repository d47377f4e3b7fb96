#!/usr/bin/python3
"""The closure matrix: torch.optim 1.13 with parameter groups, driven by
hand as loopkit's loop drives its optimizers, for tests/test_matrix_torch.c.

Run with Debian's torch (python3-torch 1.13):

    /usr/bin/python3 tests/torch/matrix_reference.py > tests/data/matrix.ref

The model is tests/plugins/multi.c (four f64 parameter tensors w[4], b[1],
u[2][2], v[3]); its loss and gradient are computed here with the same
floating-point operations in Python floats (IEEE doubles, the same libm
sin and cos), so that only torch's optimizers and schedulers are compared,
and the results must equal loopkit's bit for bit.

Cells:
- every optimizer x {automatic, manual} x {accumulate 1, 4} x {no clipping,
  clipping by norm to 0.5}, with two parameter groups (the default group
  and [OPT.g1] params = b, v with other options);
- every optimizer with three groups (g1: ndim>=2, that is u; g2: v, b);
- schedulers driving every group from its own initial rate (cosine and
  step_lr per step; SequentialLR of LinearLR and CosineAnnealingLR, each
  group's copy with copies of the children; OneCycleLR, the rate and the
  momentum of each group);
- two optimizers in automatic optimization (Lightning 1.x: each steps in
  turn with a closure of its own, its training_step scaled by 1 + its
  index, the other's gradients untouched by its backward), with and
  without accumulation and clipping, and the same two in manual
  optimization, each zeroed, clipped and stepped on its own parameters.

The automatic loop, per batch k of a window of A batches: the closure is
training_step, zero_grad on the window's first batch, backward with scale
1/A; inside the window the loop calls it, at its end opt.step(closure)
with clipping after backward in the closure the optimizer sees. The manual step:
zero_grad on the window's first batch, backward with scale 1/A, and at the
window's end clipping and opt.step() without a closure.

Each cell is written as

    cell NAME
    <the loopkit config, INI>
    end
    param NAME[I] VALUE       (every parameter after the last batch, %.17g)
"""
import math
import sys

import torch

BATCHES = 12
M = 3
NAMES = ["w", "b", "u", "v"]
SHAPES = {"w": [4], "b": [1], "u": [2, 2], "v": [3]}
INIT = {"w": [0.1, -0.2, 0.3, 0.05], "b": [0.05],
        "u": [0.2, -0.1, 0.05, 0.3], "v": [0.3, -0.2, 0.1]}
CLIP = 0.5

# loopkit's name, torch's class, the default group's options, g1's, g2's.
OPTIMIZERS = [
    ("sgd", torch.optim.SGD,
     dict(lr=0.05, momentum=0.9, weight_decay=0.01),
     dict(lr=0.02, momentum=0.5, weight_decay=0.0, nesterov=True),
     dict(lr=0.1, dampening=0.1)),
    ("adam", torch.optim.Adam,
     dict(lr=0.01, betas=(0.9, 0.99), weight_decay=0.01),
     dict(lr=0.005, weight_decay=0.0, amsgrad=True),
     dict(betas=(0.8, 0.9), eps=1e-6)),
    ("adamw", torch.optim.AdamW,
     dict(lr=0.01, weight_decay=0.1),
     dict(weight_decay=0.0),
     dict(lr=0.02, amsgrad=True)),
    ("rmsprop", torch.optim.RMSprop,
     dict(lr=0.01, alpha=0.9, momentum=0.5),
     dict(lr=0.005, centered=True),
     dict(momentum=0.0, weight_decay=0.1)),
    ("adagrad", torch.optim.Adagrad,
     dict(lr=0.1, lr_decay=0.01),
     dict(lr=0.05, weight_decay=0.1),
     # not initial_accumulator_value: torch 1.13's Adagrad fills every
     # group's state from the constructor's value, loopkit from the group's
     dict(eps=1e-3, lr_decay=0.0)),
    ("adadelta", torch.optim.Adadelta,
     dict(lr=1.0, rho=0.9, weight_decay=0.01),
     dict(lr=0.5, rho=0.95),
     dict(eps=1e-4)),
    ("adamax", torch.optim.Adamax,
     dict(lr=0.01, betas=(0.9, 0.99)),
     dict(lr=0.005, weight_decay=0.1),
     dict(betas=(0.8, 0.9))),
    ("asgd", torch.optim.ASGD,
     dict(lr=0.05, lambd=0.001, t0=3.0),
     dict(lr=0.02, alpha=0.5),
     dict(weight_decay=0.1)),
    ("nadam", torch.optim.NAdam,
     dict(lr=0.01, momentum_decay=0.004),
     dict(lr=0.005, weight_decay=0.1),
     dict(betas=(0.8, 0.9))),
    ("radam", torch.optim.RAdam,
     dict(lr=0.01),
     dict(lr=0.02, weight_decay=0.1),
     dict(betas=(0.8, 0.99))),
    ("rprop", torch.optim.Rprop,
     dict(lr=0.01),
     dict(lr=0.02, etas=(0.4, 1.1)),
     dict(step_sizes=(1e-5, 1.0))),
]


def ini_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (tuple, list)):
        return ",".join(repr(float(x)) for x in v)
    if isinstance(v, str):
        return v
    return repr(v)


def section(name, options):
    lines = ["[%s]" % name]
    lines += ["%s = %s" % (k, ini_value(v)) for k, v in options.items()]
    return lines


# ---- the model, as tests/plugins/multi.c computes it --------------------

class Model:
    def __init__(self):
        self.t = {n: torch.tensor(INIT[n], dtype=torch.float64)
                  .reshape(SHAPES[n]).requires_grad_(False) for n in NAMES}
        self.grad = {n: [0.0] * len(INIT[n]) for n in NAMES}
        for n in NAMES:
            self.t[n].grad = torch.zeros_like(self.t[n])

    def values(self, n):
        return self.t[n].reshape(-1).tolist()

    def forward(self, k, f):
        w, b, u, v = (self.values(n) for n in NAMES)
        self.cache = []
        total = 0.0
        for s in range(M):
            t = float(3 * k + s)
            x = [math.sin(1.0 + 0.37 * (4.0 * t + j)) for j in range(4)]
            z = math.cos(1.0 + 0.11 * t)
            h = w[0] * x[0]
            q = u[0] * x[0]
            for j in range(1, 4):
                h = h + w[j] * x[j]
                q = q + u[j] * x[j]
            h = h + b[0]
            p = v[0] * x[0]
            for j in range(1, 3):
                p = p + v[j] * x[j]
            e = (h + p * q) - z
            self.cache.append((x, e, p, q))
            total = total + e * e
        self.f = f
        return f * (total / M)

    def backward(self, scale, only=None):
        """Adds scale * d(loss)/d(param) into the gradients of ONLY (all)."""
        g = {n: self.t[n].grad.reshape(-1).tolist() for n in NAMES}
        new = {n: list(g[n]) for n in NAMES}
        for x, e, p, q in self.cache:
            ge = self.f * ((2.0 * e) / M)
            for j in range(4):
                new["w"][j] = new["w"][j] + scale * (ge * x[j])
            new["b"][0] = new["b"][0] + scale * ge
            for j in range(4):
                new["u"][j] = new["u"][j] + scale * ((ge * p) * x[j])
            for j in range(3):
                new["v"][j] = new["v"][j] + scale * ((ge * q) * x[j])
        for n in NAMES:
            if only is None or n in only:
                self.set_grad(n, new[n])

    def set_grad(self, n, values):
        self.t[n].grad = torch.tensor(values, dtype=torch.float64).reshape(
            SHAPES[n])

    def zero(self, names):
        for n in names:
            self.set_grad(n, [0.0] * len(INIT[n]))

    def clip(self, names, value):
        """loopkit's clip by norm (src/loop/clip.c): the sum of squares in the
        parameters' order, sqrt, value / (norm + 1e-6), applied below 1."""
        total = 0.0
        for n in names:
            for g in self.t[n].grad.reshape(-1).tolist():
                total = total + g * g
        norm = math.sqrt(total)
        coef = value / (norm + 1e-6)
        if coef >= 1.0:
            return
        for n in names:
            self.set_grad(n, [g * coef
                              for g in self.t[n].grad.reshape(-1).tolist()])

    def dump(self):
        out = []
        for n in NAMES:
            for i, val in enumerate(self.values(n)):
                out.append("param %s[%d] %.17g" % (n, i, val))
        return out


def make(cls, groups, base):
    kwargs = dict(base)
    if "foreach" in cls.__init__.__code__.co_varnames:
        kwargs["foreach"] = False
    return cls(groups, **kwargs)


# ---- the loops ------------------------------------------------------------

def train_one(model, opt, acc, clip, manual, schedulers=()):
    """One optimizer over every parameter, BATCHES batches."""
    for k in range(BATCHES):
        first, last = k % acc == 0, k % acc == acc - 1
        if manual:
            model.forward(k, 1.0)
            if first:
                model.zero(NAMES)
            model.backward(1.0 / acc)
            if last:
                if clip:
                    model.clip(NAMES, CLIP)
                opt.step()
        else:
            def closure():
                loss = model.forward(k, 1.0) / acc
                if first:
                    model.zero(NAMES)
                model.backward(1.0 / acc)
                if clip and last:  # in the closure the optimizer calls
                    model.clip(NAMES, CLIP)
                return loss
            if last:
                opt.step(closure)
            else:
                closure()
        if last:
            for s in schedulers:
                s.step()


def train_two(model, opts, params, acc, clip, manual):
    """Several optimizers, each over PARAMS[i]."""
    for k in range(BATCHES):
        first, last = k % acc == 0, k % acc == acc - 1
        if manual:
            model.forward(k, 1.0)
            if first:
                for p in params:
                    model.zero(p)
            model.backward(1.0 / acc)
            if last:
                for opt, p in zip(opts, params):
                    if clip:
                        model.clip(p, CLIP)
                    opt.step()
            continue
        for i, (opt, p) in enumerate(zip(opts, params)):
            def closure():
                loss = model.forward(k, 1.0 + i) / acc
                if first:
                    model.zero(p)
                model.backward(1.0 / acc, only=p)
                if clip and last:
                    model.clip(p, CLIP)
                return loss
            if last:
                opt.step(closure)
            else:
                closure()


# ---- the cells --------------------------------------------------------------

def loop_section(steps, acc, clip, manual):
    lines = ["[loop]", "max_steps = %d" % steps]
    if manual:
        lines.append("manual_optimization = true")
    else:
        lines.append("accumulate_grad_batches = %d" % acc)
        if clip:
            lines.append("gradient_clip_val = %r" % CLIP)
    return lines


def multi_section(acc, clip, manual, per_optimizer=False):
    if not manual:
        return []
    lines = ["[multi]", "manual = true", "accumulate = %d" % acc]
    if clip:
        lines.append("clip = %r" % CLIP)
    if per_optimizer:
        lines.append("per_optimizer = true")
    return lines


def emit(name, config, model):
    print("cell %s" % name)
    for line in config:
        print(line)
    print("end")
    for line in model.dump():
        print(line)


def group_cells():
    for name, cls, base, g1, g2 in OPTIMIZERS:
        for manual in (False, True):
            for acc in (1, 4):
                for clip in (False, True):
                    model = Model()
                    t = model.t
                    opt = make(cls, [dict(params=[t["w"], t["u"]]),
                                     dict(params=[t["b"], t["v"]], **g1)],
                                base)
                    train_one(model, opt, acc, clip, manual)
                    config = loop_section(BATCHES // acc, acc, clip, manual)
                    config += ["[plugins]", "step = multi",
                               "optimizer = %s" % name]
                    config += multi_section(acc, clip, manual)
                    config += section(name, dict(base, groups="g1"))
                    config += section(name + ".g1", dict(g1, params="b, v"))
                    emit("%s-%s-acc%d-%s" % (name,
                                             "manual" if manual else "auto",
                                             acc, "clip" if clip else "noclip"),
                         config, model)
        # three groups: g1 takes u (ndim>=2), g2 v and b; w stays default
        model = Model()
        t = model.t
        opt = make(cls, [dict(params=[t["w"]]),
                         dict(params=[t["u"]], **g1),
                         dict(params=[t["b"], t["v"]], **g2)], base)
        train_one(model, opt, 1, False, False)
        config = loop_section(BATCHES, 1, False, False)
        config += ["[plugins]", "step = multi", "optimizer = %s" % name]
        config += section(name, dict(base, groups="g1, g2"))
        config += section(name + ".g1", dict(g1, params="ndim>=2"))
        config += section(name + ".g2", dict(g2, params="v, b"))
        emit("%s-3groups" % name, config, model)


def scheduler_cells():
    sgd = OPTIMIZERS[0]
    adam = OPTIMIZERS[1]
    cases = [
        ("sgd-cosine", sgd, "cosine",
         lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(
             o, T_max=6, eta_min=0.001),
         dict(T_max=6, eta_min=0.001, interval="step")),
        ("adam-step_lr", adam, "step_lr",
         lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5),
         dict(step_size=2, gamma=0.5, interval="step")),
    ]
    # A composition: each group's copy of the sequential scheduler has its
    # own copies of the children.
    def seq(o):
        lrs = torch.optim.lr_scheduler
        return lrs.SequentialLR(o, [
            lrs.LinearLR(o, start_factor=0.1, total_iters=4),
            lrs.CosineAnnealingLR(o, T_max=8, eta_min=0.001)], milestones=[4])
    cases.append(("sgd-sequential", sgd, "lrs:sequential", seq,
                  dict(schedulers="warm:linear_warmup, main:cosine",
                       milestones="4", interval="step")))
    # OneCycleLR sets every group's rate and momentum (beta1 for adam).
    cases.append(("adam-onecycle", adam, "onecycle",
                  lambda o: torch.optim.lr_scheduler.OneCycleLR(
                      o, max_lr=0.02, total_steps=12),
                  dict(max_lr=0.02, total_steps=12)))
    extra = {"sgd-sequential": section("warm", dict(start_factor=0.1,
                                                    total_iters=4)) +
             section("main", dict(T_max=8, eta_min=0.001))}
    for cell, (name, cls, base, g1, g2), sched, make_sched, options in cases:
        model = Model()
        t = model.t
        opt = make(cls, [dict(params=[t["w"]]),
                         dict(params=[t["u"]], **g1),
                         dict(params=[t["b"], t["v"]], **g2)], base)
        train_one(model, opt, 1, False, False, [make_sched(opt)])
        config = loop_section(BATCHES, 1, False, False)
        config += ["[plugins]", "step = multi", "optimizer = %s" % name,
                   "scheduler = %s" % sched]
        config += section(name, dict(base, groups="g1, g2"))
        config += section(name + ".g1", dict(g1, params="u"))
        config += section(name + ".g2", dict(g2, params="b, v"))
        config += section(sched.split(":")[0], options)
        config += extra.get(cell, [])
        emit(cell, config, model)


def two_optimizer_cells():
    sgd = OPTIMIZERS[0]
    adam = OPTIMIZERS[1]
    params = [["w", "b"], ["u", "v"]]
    for manual in (False, True):
        for acc in (1, 4):
            for clip in (False, True):
                model = Model()
                t = model.t
                opts = [make(sgd[1], [dict(params=[t[n] for n in params[0]])],
                             sgd[2]),
                        make(adam[1], [dict(params=[t[n] for n in params[1]])],
                             adam[2])]
                train_two(model, opts, params, acc, clip, manual)
                config = loop_section(2 * BATCHES // acc, acc, clip, manual)
                config += ["[plugins]", "step = multi",
                           "optimizer = first:sgd, second:adam"]
                config += multi_section(acc, clip, manual, per_optimizer=True)
                config += section("first", dict(sgd[2], params="w, b"))
                config += section("second", adam[2])
                emit("two-%s-acc%d-%s" % ("manual" if manual else "auto", acc,
                                          "clip" if clip else "noclip"),
                     config, model)


def main():
    # torch.tensor(float) state (ASGD eta and mu, NAdam mu_product, step
    # counts) stays float32, as in a default torch session
    print("# tests/torch/matrix_reference.py, torch %s" % torch.__version__)
    group_cells()
    scheduler_cells()
    two_optimizer_cells()
    sys.stdout.flush()


if __name__ == "__main__":
    main()

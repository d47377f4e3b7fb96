#!/usr/bin/python3
"""Reference learning rates and momenta of the rest of
torch.optim.lr_scheduler, alone and composed.

Run with Debian's torch (python3-torch 1.13):

    /usr/bin/python3 tests/torch/scheduler_sequence_reference.py \
        > tests/data/scheduler_sequences.ref

ExponentialLR, MultiStepLR, ConstantLR, PolynomialLR,
CosineAnnealingWarmRestarts, CyclicLR and OneCycleLR, and SequentialLR
and ChainedScheduler of several of them (and of StepLR, CosineAnnealingLR
and LinearLR), drive torch.optim.SGD (or Adam, foreach=False) on least
squares (loopkit's lstsq, m=20 n=5, in f64; the mirror of
scheduler_reference.py) for STEPS steps, the scheduler stepping after
every optimizer step, as loopkit's with interval = step. The learning rate
and the momentum (SGD's momentum, Adam's betas[0]) each step uses are
recorded: they must be loopkit's bit for bit; the losses and the final
parameters to rounding. A rate sequence does not depend on the training,
so its first values are also what interval = epoch gives epoch by epoch.

Each case is written as

    case NAME optimizer OPT "KEY=VALUE ..." scheduler SPEC "KEY=VALUE ..."
    section NAME "KEY=VALUE ..."   (a child's [NAME], for a composite)
    lr STEP VALUE                  (the rate optimizer step STEP uses)
    momentum STEP VALUE            (its momentum, when the case cycles it)
    loss STEP VALUE
    param NAME[I] VALUE            (after the last step)

with %.17g numbers. SPEC is the [plugins] scheduler value (NAME:PLUGIN or
PLUGIN); the option lists are loopkit's (the top scheduler's with
interval=step, which its children take).
"""
import math
import os
import sys

import torch
from torch.optim import lr_scheduler as S

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scheduler_reference import Lstsq, check_close  # noqa: E402

STEPS = 60

# loopkit's plugin for each torch class.
PLUGINS = {
    S.StepLR: "step_lr", S.CosineAnnealingLR: "cosine",
    S.LinearLR: "linear_warmup", S.ExponentialLR: "exponential",
    S.MultiStepLR: "multistep", S.ConstantLR: "constant",
    S.PolynomialLR: "polynomial",
    S.CosineAnnealingWarmRestarts: "cosine_warm_restarts",
    S.CyclicLR: "cyclic", S.OneCycleLR: "onecycle",
}


class Sched:
    """One scheduler: torch's class and keyword arguments, loopkit's
    options (the same names unless LOOPKIT says otherwise: what a custom
    scale_fn is in loopkit's options), and the instance name in a
    composite."""

    def __init__(self, cls, name=None, loopkit=None, **kwargs):
        self.cls, self.name, self.kwargs = cls, name, kwargs
        self.loopkit = loopkit

    def make(self, opt):
        return self.cls(opt, **self.kwargs)

    def plugin(self):
        return PLUGINS[self.cls]

    def options(self):
        if self.loopkit is not None:
            return self.loopkit
        o = {k: v for k, v in self.kwargs.items()}
        # torch's total_steps=None is loopkit's 0 (its default, auto, is
        # the run's length).
        if self.cls is S.OneCycleLR and "total_steps" not in o:
            o["total_steps"] = 0
        return o


class Composite:
    """SequentialLR (milestones) or ChainedScheduler (milestones None) of
    CHILDREN, built in order, as a user builds them."""

    def __init__(self, children, milestones=None, name=None):
        self.children, self.milestones, self.name = children, milestones, name

    def make(self, opt):
        made = [c.make(opt) for c in self.children]
        if self.milestones is None:
            return S.ChainedScheduler(made)
        return S.SequentialLR(opt, made, milestones=self.milestones)

    def plugin(self):
        return "chained" if self.milestones is None else "sequential"

    def options(self):
        o = {"schedulers": ",".join("%s:%s" % (c.name, c.plugin())
                                    for c in self.children)}
        if self.milestones is not None:
            o["milestones"] = self.milestones
        return o


def sections(spec):
    """The children's sections, depth first."""
    out = []
    for c in getattr(spec, "children", []):
        out.append((c.name, c.options()))
        out.extend(sections(c))
    return out


def tri2(x):
    return 1 / (2. ** (x - 1))


def exp97(x):
    return 0.97 ** x


SGD = ("sgd", dict(lr=0.1, momentum=0.9))
SGD_PLAIN = ("sgd", dict(lr=0.05))
ADAM = ("adam", dict(lr=0.01, betas=(0.9, 0.99)))

# (name, optimizer, scheduler)
CASES = [
    ("exponential", SGD, Sched(S.ExponentialLR, gamma=0.95)),
    ("exponential_fast", SGD_PLAIN, Sched(S.ExponentialLR, gamma=0.8)),
    ("multistep", SGD, Sched(S.MultiStepLR, milestones=[10, 25, 40],
                             gamma=0.5)),
    # torch's Counter: a milestone twice decays twice; one at 0 at once.
    ("multistep_counter", SGD_PLAIN, Sched(S.MultiStepLR,
                                           milestones=[0, 7, 7, 30])),
    ("constant", SGD, Sched(S.ConstantLR)),
    ("constant_long", SGD, Sched(S.ConstantLR, factor=0.5, total_iters=17)),
    ("constant_zero_iters", SGD_PLAIN, Sched(S.ConstantLR, factor=0.25,
                                             total_iters=0)),
    ("polynomial", SGD, Sched(S.PolynomialLR)),
    ("polynomial_square", SGD, Sched(S.PolynomialLR, total_iters=40,
                                     power=2.0)),
    ("polynomial_root", SGD_PLAIN, Sched(S.PolynomialLR, total_iters=25,
                                         power=0.5)),
    ("warm_restarts", SGD, Sched(S.CosineAnnealingWarmRestarts, T_0=10)),
    ("warm_restarts_mult", SGD, Sched(S.CosineAnnealingWarmRestarts, T_0=3,
                                      T_mult=2, eta_min=1e-4)),
    ("warm_restarts_eta", SGD_PLAIN, Sched(S.CosineAnnealingWarmRestarts,
                                           T_0=7, eta_min=0.0005)),
    ("cyclic", SGD, Sched(S.CyclicLR, base_lr=0.001, max_lr=0.01,
                          step_size_up=5)),
    ("cyclic_triangular2", SGD, Sched(S.CyclicLR, base_lr=0.002, max_lr=0.02,
                                      step_size_up=4, step_size_down=7,
                                      mode="triangular2", base_momentum=0.7,
                                      max_momentum=0.95)),
    ("cyclic_exp_range", SGD, Sched(S.CyclicLR, base_lr=0.001, max_lr=0.008,
                                    step_size_up=6, mode="exp_range",
                                    gamma=0.97)),
    # torch evaluates a built-in mode's function on its own scale_mode; a
    # scale_fn with another scale_mode is loopkit's scale_mode.
    ("cyclic_iterations", SGD, Sched(
        S.CyclicLR, base_lr=0.001, max_lr=0.01, step_size_up=3,
        step_size_down=5, scale_fn=tri2, scale_mode="iterations",
        loopkit=dict(base_lr=0.001, max_lr=0.01, step_size_up=3,
                     step_size_down=5, mode="triangular2",
                     scale_mode="iterations"))),
    ("cyclic_exp_cycle", SGD, Sched(
        S.CyclicLR, base_lr=0.002, max_lr=0.01, step_size_up=4,
        scale_fn=exp97, scale_mode="cycle",
        loopkit=dict(base_lr=0.002, max_lr=0.01, step_size_up=4,
                     mode="exp_range", gamma=0.97, scale_mode="cycle"))),
    ("cyclic_no_momentum", SGD_PLAIN, Sched(
        S.CyclicLR, base_lr=0.01, max_lr=0.1, step_size_up=7,
        step_size_down=2, cycle_momentum=False)),
    ("onecycle", SGD, Sched(S.OneCycleLR, max_lr=0.05, total_steps=STEPS)),
    ("onecycle_three_phase", SGD, Sched(
        S.OneCycleLR, max_lr=0.04, total_steps=STEPS, three_phase=True,
        anneal_strategy="linear", pct_start=0.4)),
    ("onecycle_epochs", SGD_PLAIN, Sched(
        S.OneCycleLR, max_lr=0.1, epochs=7, steps_per_epoch=10,
        pct_start=0.25, div_factor=10.0, final_div_factor=100.0,
        cycle_momentum=False)),
    # Adam: betas[0] cycled (torch's use_beta1).
    ("onecycle_adam", ADAM, Sched(S.OneCycleLR, max_lr=0.02,
                                  total_steps=STEPS, base_momentum=0.8,
                                  max_momentum=0.92)),
    # SequentialLR: a warm-up then the main schedule, at a milestone.
    ("sequential_warmup_cosine", SGD, Composite([
        Sched(S.LinearLR, "warm", start_factor=0.1, total_iters=10),
        Sched(S.CosineAnnealingLR, "main", T_max=50)], [10], "lrs")),
    # torch's docstring example.
    ("sequential_constant_exponential", SGD_PLAIN, Composite([
        Sched(S.ConstantLR, "warm", factor=0.1, total_iters=2),
        Sched(S.ExponentialLR, "decay", gamma=0.9)], [2], "lrs")),
    ("sequential_three", SGD, Composite([
        Sched(S.LinearLR, "warm", start_factor=0.25, total_iters=8),
        Sched(S.StepLR, "steps", step_size=7, gamma=0.5),
        Sched(S.CosineAnnealingWarmRestarts, "restarts", T_0=5,
              eta_min=0.001)], [8, 30], "lrs")),
    # step(0) of CosineAnnealingLR is its closed form; of MultiStepLR,
    # PolynomialLR: theirs.
    ("sequential_closed_forms", SGD, Composite([
        Sched(S.ExponentialLR, "a", gamma=0.9),
        Sched(S.CosineAnnealingLR, "b", T_max=10, eta_min=0.001),
        Sched(S.MultiStepLR, "c", milestones=[0, 5], gamma=0.5),
        Sched(S.PolynomialLR, "d", total_iters=8, power=1.5)],
        [15, 25, 40], "lrs")),
    ("sequential_cyclic", SGD, Composite([
        Sched(S.LinearLR, "warm", start_factor=0.5, total_iters=5),
        Sched(S.CyclicLR, "cycle", base_lr=0.001, max_lr=0.01,
              step_size_up=4)], [5], "lrs")),
    # OneCycleLR sets the group's initial_lr: SequentialLR resets the rate
    # to it and the warm-up starts from there.
    ("sequential_onecycle", SGD, Composite([
        Sched(S.ConstantLR, "warm", factor=0.5, total_iters=3),
        Sched(S.OneCycleLR, "cycle", max_lr=0.02, total_steps=STEPS)],
        [10], "lrs")),
    # ChainedScheduler: torch's docstring example, and more.
    ("chained_constant_exponential", SGD_PLAIN, Composite([
        Sched(S.ConstantLR, "warm", factor=0.1, total_iters=2),
        Sched(S.ExponentialLR, "decay", gamma=0.9)])),
    ("chained_warmup_cosine", SGD, Composite([
        Sched(S.LinearLR, "warm", start_factor=0.5, total_iters=10),
        Sched(S.CosineAnnealingLR, "main", T_max=30, eta_min=0.0001),
        Sched(S.MultiStepLR, "drops", milestones=[20, 45], gamma=0.3)])),
    # A SequentialLR inside a ChainedScheduler.
    ("chained_sequential", SGD, Composite([
        Composite([Sched(S.LinearLR, "warm", start_factor=0.2,
                         total_iters=6),
                   Sched(S.ExponentialLR, "decay", gamma=0.97)], [6],
                  "phases"),
        Sched(S.StepLR, "steps", step_size=12, gamma=0.5)])),
]


def option_text(kwargs):
    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (tuple, list)):
            return ",".join(repr(u) for u in v)
        return repr(v) if not isinstance(v, str) else v

    return " ".join("%s=%s" % (k, value(v)) for k, v in kwargs.items())


def momentum_of(opt):
    g = opt.param_groups[0]
    return g["betas"][0] if "betas" in g else g["momentum"]


def cycles_momentum(spec):
    if isinstance(spec, Composite):
        return any(cycles_momentum(c) for c in spec.children)
    return spec.cls in (S.CyclicLR, S.OneCycleLR) and \
        spec.kwargs.get("cycle_momentum", True)


def run(out, name, optimizer, spec):
    opt_name, opt_kwargs = optimizer
    prob = Lstsq(20, 5)
    opt_class = torch.optim.SGD if opt_name == "sgd" else torch.optim.Adam
    opt = opt_class(prob.params, foreach=False, **opt_kwargs)
    sched = spec.make(opt)
    losses = []

    def closure():
        opt.zero_grad()
        loss, grads = prob.evaluate()
        f, ag = prob.autograd()
        check_close("loss", loss, f)
        scale = max(abs(u) for g in grads for u in g)
        for g, h in zip(grads, ag):
            for u, v in zip(g, h):
                check_close("gradient", u, v, scale)
        for p, g in zip(prob.params, grads):
            p.grad = torch.tensor(g, dtype=torch.float64)
        losses.append(loss)
        return torch.tensor(loss, dtype=torch.float64)

    top = dict(interval="step")
    top.update(spec.options())
    label = "%s:%s" % (spec.name, spec.plugin()) if spec.name else \
        spec.plugin()
    out.write('case %s optimizer %s "%s" scheduler %s "%s"\n'
              % (name, opt_name, option_text(opt_kwargs), label,
                 option_text(top)))
    for child, options in sections(spec):
        out.write('section %s "%s"\n' % (child, option_text(options)))
    momentum = cycles_momentum(spec)
    rates = set()
    for step in range(1, STEPS + 1):
        lr = opt.param_groups[0]["lr"]
        rates.add(lr)
        out.write("lr %d %.17g\n" % (step, lr))
        if momentum:
            out.write("momentum %d %.17g\n" % (step, momentum_of(opt)))
        opt.step(closure)
        sched.step()
        out.write("loss %d %.17g\n" % (step, losses[-1]))
    sys.stderr.write("%s: %d rates\n" % (name, len(rates)))
    for pname, p in zip(prob.names, prob.params):
        for i, v in enumerate(p.detach().tolist()):
            if not math.isfinite(v):
                raise SystemExit("%s: non-finite parameter" % name)
            out.write("param %s[%d] %.17g\n" % (pname, i, v))


def main():
    torch.set_num_threads(1)
    for name, optimizer, spec in CASES:
        run(sys.stdout, name, optimizer, spec)


if __name__ == "__main__":
    main()

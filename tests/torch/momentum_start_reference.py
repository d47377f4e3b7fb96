#!/usr/bin/python3
"""Reference iterates of torch.optim.SGD and RMSprop created with
momentum = 0 under a scheduler that cycles the momentum (OneCycleLR,
CyclicLR), which starts it during the run.

Run with Debian's torch (python3-torch 1.13):

    /usr/bin/python3 tests/torch/momentum_start_reference.py \
        > tests/data/momentum_start.ref

What torch 1.13 does, which loopkit's sgd and rmsprop reproduce:

- SGD keeps state['momentum_buffer'] = None while the momentum is 0; the
  first step with momentum != 0 makes it a copy of d_p, and later steps
  with momentum 0 leave it as it is (_single_tensor_sgd).
- RMSprop makes its state at its first step: momentum_buffer, zero, only
  if group['momentum'] > 0 then, whatever it was at create. A later step
  with momentum > 0 without it raises KeyError: 'momentum_buffer' (the
  case rmsprop_late below: the reference records the step that fails).

Both schedulers set the momentum in their constructors (before the first
step), as loopkit's do in create. Every optimizer runs with foreach=False
on the mirrors of loopkit's lstsq (f64 and f32) and rosenbrock n=2 of
first_order_reference.py (checked against autograd at every step), the
scheduler stepping after every optimizer step, as loopkit's with interval =
step. Each case is written as

    case NAME problem "PROBLEM" optimizer OPT "KEY=VALUE ..." scheduler SCHED "KEY=VALUE ..."
    lr STEP VALUE        (the rate optimizer step STEP uses)
    momentum STEP VALUE  (its momentum)
    loss STEP VALUE      (the closure's loss in step STEP)
    fails STEP           (torch raised KeyError in step STEP: the last)
    param NAME[I] VALUE  (the parameters after the last step that ran)
    state NAME[I] VALUE  (the optimizer's state then, named as loopkit's)

with %.17g numbers. The state is torch's state dict and the group's lr and
momentum (first_order_reference.py's state_lines), and loopkit's flag of
whether torch's state holds the buffers: sgd.initialized (the buffer is
not None), rmsprop.has_momentum_buffer (the key is there).
"""
import math
import os
import sys

import torch
from torch.optim import lr_scheduler as S

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from first_order_reference import (check_close, make_problem,  # noqa: E402
                                   state_lines)

STEPS = 40

PROBLEMS = [("lstsq", dict(m=20, n=5)), ("rosenbrock", dict(n=2)),
            ("lstsq", dict(m=20, n=5, dtype="f32"))]

# (name, optimizer, its options, scheduler, its options): every optimizer
# created with momentum = 0. "late": the cycle starts at momentum 0, so
# the momentum starts at step 2.
CASES = [
    ("sgd_onecycle", "sgd", dict(lr=0.01), "onecycle",
     dict(max_lr=0.002, total_steps=STEPS)),
    ("sgd_onecycle_late", "sgd", dict(lr=0.01, dampening=0.2,
                                      weight_decay=0.01), "onecycle",
     dict(max_lr=0.001, total_steps=STEPS, base_momentum=0.9,
          max_momentum=0.0, three_phase=True)),
    ("sgd_cyclic", "sgd", dict(lr=0.01), "cyclic",
     dict(base_lr=0.0002, max_lr=0.002, step_size_up=5)),
    ("sgd_cyclic_late", "sgd", dict(lr=0.01), "cyclic",
     dict(base_lr=0.0002, max_lr=0.001, step_size_up=3, step_size_down=6,
          base_momentum=0.95, max_momentum=0.0, mode="triangular2")),
    ("rmsprop_onecycle", "rmsprop", dict(lr=0.01), "onecycle",
     dict(max_lr=0.002, total_steps=STEPS)),
    ("rmsprop_cyclic", "rmsprop", dict(lr=0.01, centered=True,
                                       weight_decay=0.01, alpha=0.9),
     "cyclic", dict(base_lr=0.0005, max_lr=0.003, step_size_up=4)),
    ("rmsprop_late", "rmsprop", dict(lr=0.01), "onecycle",
     dict(max_lr=0.002, total_steps=STEPS, base_momentum=0.9,
          max_momentum=0.0)),
]

OPTIMIZERS = {"sgd": torch.optim.SGD, "rmsprop": torch.optim.RMSprop}
SCHEDULERS = {"onecycle": S.OneCycleLR, "cyclic": S.CyclicLR}


def option_text(kwargs):
    def value(v):
        return v if isinstance(v, str) else \
            ("true" if v else "false") if isinstance(v, bool) else repr(v)

    return " ".join("%s=%s" % (k, value(v)) for k, v in kwargs.items())


def flag_lines(opt_name, opt, prob):
    """loopkit's flag of whether torch's state holds the buffers."""
    state = opt.state[prob.params[0]]
    if opt_name == "sgd":
        return [("sgd.initialized", [float(state.get("momentum_buffer")
                                           is not None)])]
    return [("rmsprop.has_momentum_buffer", [float("momentum_buffer" in
                                                   state)])]


def run(out, name, problem_name, problem_opts, opt_name, opt_kwargs,
        sched_name, sched_kwargs):
    prob = make_problem(problem_name, problem_opts)
    opt = OPTIMIZERS[opt_name](prob.params, foreach=False, momentum=0.0,
                               **opt_kwargs)
    sched = SCHEDULERS[sched_name](opt, **sched_kwargs)
    losses = []

    def closure():
        opt.zero_grad()
        loss, grads = prob.evaluate()
        f, ag = prob.autograd()
        tol = 1e-4 if prob.f32 else 1e-12
        check_close("loss", loss, f, tol=tol)
        scale = max(abs(u) for g in ag for u in g)
        for g, h in zip(grads, ag):
            for u, v in zip(g, h):
                check_close("gradient", u, v, scale, tol=tol)
        for p, g in zip(prob.params, grads):
            p.grad = torch.tensor(g, dtype=p.dtype)
        losses.append(loss)
        return torch.tensor(loss, dtype=torch.float64)

    top = dict(interval="step")
    top.update(sched_kwargs)
    out.write('case %s problem "%s %s" optimizer %s "%s" scheduler %s "%s"\n'
              % (name, problem_name,
                 " ".join("%s=%s" % kv for kv in problem_opts.items()),
                 opt_name, option_text(dict(momentum=0.0, **opt_kwargs)),
                 sched_name, option_text(top)))
    for step in range(1, STEPS + 1):
        group = opt.param_groups[0]
        out.write("lr %d %.17g\n" % (step, group["lr"]))
        out.write("momentum %d %.17g\n" % (step, group["momentum"]))
        try:
            opt.step(closure)
        except KeyError as e:
            if opt_name != "rmsprop" or e.args != ("momentum_buffer",):
                raise
            out.write("fails %d\n" % step)
            sys.stderr.write("%s %s: KeyError at step %d\n" %
                             (name, problem_name, step))
            break
        sched.step()
        out.write("loss %d %.17g\n" % (step, losses[-1]))
    for pname, p in zip(prob.names, prob.params):
        for i, v in enumerate(p.detach().tolist()):
            if not math.isfinite(v):
                raise SystemExit("%s: non-finite parameter" % name)
            out.write("param %s[%d] %.17g\n" % (pname, i, v))
    for sname, values in (state_lines(opt_name, opt, prob) +
                          flag_lines(opt_name, opt, prob)):
        for i, v in enumerate(values):
            out.write("state %s[%d] %.17g\n" % (sname, i, v))


def main():
    torch.set_num_threads(1)
    for case in CASES:
        for problem_name, problem_opts in PROBLEMS:
            run(sys.stdout, case[0], problem_name, problem_opts, *case[1:])


if __name__ == "__main__":
    main()

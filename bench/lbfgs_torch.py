#!/usr/bin/python3
"""Closure evaluations per second of torch.optim.LBFGS on the 2-D Rosenbrock
function, measured as bench/lbfgs measures loopkit's lbfgs: REPS times a
fresh optimizer from (-1.2, 1) takes one step (history_size 10, strong-Wolfe
line search, max_iter 1000, tolerance_grad 1e-5, tolerance_change 1e-9)
with the usual closure (zero_grad, the loss, backward); only the steps are
timed. Prints one line:

    evals N seconds S evals_per_second E

Run with Debian's torch: /usr/bin/python3 bench/lbfgs_torch.py [REPS]
"""
import sys
import time

import torch


def rosenbrock(x):
    a, b = x[:-1], x[1:]
    return (100.0 * (b - a ** 2) ** 2 + (1 - a) ** 2).sum()


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    torch.set_num_threads(1)
    evals, seconds = 0, 0.0
    for _ in range(reps):
        x = torch.tensor([-1.2, 1.0], dtype=torch.float64, requires_grad=True)
        opt = torch.optim.LBFGS([x], history_size=10, max_iter=1000,
                                tolerance_grad=1e-5, tolerance_change=1e-9,
                                line_search_fn="strong_wolfe")
        calls = [0]

        def closure():
            opt.zero_grad()
            f = rosenbrock(x)
            f.backward()
            calls[0] += 1
            return f

        start = time.perf_counter()
        opt.step(closure)
        seconds += time.perf_counter() - start
        evals += calls[0]
    print("evals %d seconds %.9f evals_per_second %.1f" %
          (evals, seconds, evals / seconds))


if __name__ == "__main__":
    main()

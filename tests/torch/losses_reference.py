#!/usr/bin/python3
"""Reference values and input gradients of the losses of the layer kit
(loopkit/nn.h: lk_nn_crossentropy_ex, lk_nn_nll, lk_nn_mse, lk_nn_l1,
lk_nn_smooth_l1, lk_nn_huber, lk_nn_bce_with_logits) and of sequential's
loss option.

Run with Debian's torch (python3-torch 1.13), no network:

    /usr/bin/python3 tests/torch/losses_reference.py > tests/data/losses.ref

Every case builds small deterministic f32 inputs (torch.manual_seed per
case), calls torch's functional form with mean reduction in float32 on the
CPU, then backward of dloss * loss. The file is

    case NAME loss=LOSS KEY=VALUE ...   (sizes, dloss and the options)
    t TENSOR COUNT V1 V2 ...            (%.9g floats; targets as ints)
    end

with tensors inp, target, and where the case has them weight or
pos_weight, then value (the loss) and dinp. tests/test_losses.c reads it.
"""
import sys

import torch
import torch.nn.functional as F

torch.set_num_threads(1)
out = sys.stdout


def emit(name, t):
    t = t.detach().reshape(-1)
    if t.dtype in (torch.int32, torch.int64):
        vals = " ".join(str(int(v)) for v in t.tolist())
    else:
        vals = " ".join("%.9g" % v for v in t.tolist())
    out.write("t %s %d %s\n" % (name, t.numel(), vals))


def case(name, loss, fn, inp, target, dloss, extra=None, **params):
    inp = inp.clone().requires_grad_(True)
    value = fn(inp)
    (value * dloss).backward()
    items = " ".join("%s=%s" % (k, v) for k, v in params.items())
    out.write("case %s loss=%s N=%d W=%d dloss=%s %s\n"
              % (name, loss, inp.shape[0], inp.numel() // inp.shape[0],
                 repr(dloss), items))
    emit("inp", inp)
    emit("target", target)
    for k, v in (extra or {}).items():
        emit(k, v)
    emit("value", value)
    emit("dinp", inp.grad)
    out.write("end\n")


def regression(seed, shape=(6, 3), scale=2.0):
    torch.manual_seed(seed)
    x = torch.randn(*shape) * scale
    t = torch.randn(*shape) * scale
    return x, t


def main():
    out.write("# loopkit losses: tests/torch/losses_reference.py, torch %s\n"
              % torch.__version__)
    x, t = regression(1)
    case("mse", "mse", lambda a: F.mse_loss(a, t), x, t, 0.7)
    x, t = regression(2, (5, 1))
    case("mse_column", "mse", lambda a: F.mse_loss(a, t), x, t, 1.0)
    x, t = regression(3)
    case("l1", "l1", lambda a: F.l1_loss(a, t), x, t, 0.7)
    x, t = regression(4)
    case("smooth_l1", "smooth_l1", lambda a: F.smooth_l1_loss(a, t), x, t,
         0.7, beta=1.0)
    case("smooth_l1_beta", "smooth_l1",
         lambda a: F.smooth_l1_loss(a, t, beta=2.5), x, t, 1.3, beta=2.5)
    case("smooth_l1_beta0", "smooth_l1",
         lambda a: F.smooth_l1_loss(a, t, beta=0.0), x, t, 1.0, beta=0.0)
    x, t = regression(5)
    case("huber", "huber", lambda a: F.huber_loss(a, t), x, t, 0.7,
         delta=1.0)
    case("huber_delta", "huber", lambda a: F.huber_loss(a, t, delta=2.5), x,
         t, 1.3, delta=2.5)

    torch.manual_seed(6)
    x = torch.randn(8, 3) * 3
    t = (torch.rand(8, 3) > 0.5).float()
    t[0, 0] = 0.25  # a soft target
    case("bce", "bce_with_logits",
         lambda a: F.binary_cross_entropy_with_logits(a, t), x, t, 0.7)
    pw = torch.tensor([0.5, 2.0, 3.5])
    case("bce_pos_weight", "bce_with_logits",
         lambda a: F.binary_cross_entropy_with_logits(a, t, pos_weight=pw),
         x, t, 1.3, {"pos_weight": pw})

    torch.manual_seed(7)
    z = torch.randn(9, 5) * 2
    y = torch.randint(0, 5, (9,))
    w = torch.tensor([0.3, 1.0, 2.0, 0.7, 1.5])
    lp = F.log_softmax(z, dim=1).detach()
    case("nll", "nll", lambda a: F.nll_loss(a, y), lp, y, 0.7)
    case("nll_weight", "nll", lambda a: F.nll_loss(a, y, weight=w), lp, y,
         1.3, {"weight": w})
    case("cross_entropy", "cross_entropy", lambda a: F.cross_entropy(a, y),
         z, y, 0.7, label_smoothing=0.0)
    case("cross_entropy_smoothing", "cross_entropy",
         lambda a: F.cross_entropy(a, y, label_smoothing=0.1), z, y, 1.3,
         label_smoothing=0.1)
    case("cross_entropy_weight", "cross_entropy",
         lambda a: F.cross_entropy(a, y, weight=w), z, y, 0.7,
         {"weight": w}, label_smoothing=0.0)
    case("cross_entropy_weight_smoothing", "cross_entropy",
         lambda a: F.cross_entropy(a, y, weight=w, label_smoothing=0.2), z,
         y, 1.3, {"weight": w}, label_smoothing=0.2)


if __name__ == "__main__":
    main()

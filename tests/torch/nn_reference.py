#!/usr/bin/python3
"""Reference forward and backward passes of the layer kit's layers (loopkit/nn.h).

Run with Debian's torch (python3-torch 1.13), no network:

    /usr/bin/python3 tests/torch/nn_reference.py > tests/data/nn.ref

Every case builds small deterministic f32 inputs (torch.manual_seed per
case), runs torch's module or functional form in float32 on the CPU, and
calls backward with a fixed random upstream gradient `dout`. The file is

    case NAME KEY=VALUE ...          (the layer's sizes and options)
    t TENSOR COUNT V1 V2 ...         (%.9g floats; indices and masks as ints)
    end

tests/test_nn.c reads it, runs the kit on the same inputs and checks every
output and gradient; it needs neither torch nor numpy. Gradients are named
d<input>. The attention follows nanoGPT's CausalSelfAttention without
c_attn and c_proj (its non-flash path: the masked softmax of q k^T /
sqrt(hs), times v).
"""
import math
import sys

import torch
import torch.nn.functional as F

torch.set_num_threads(1)
out = sys.stdout


def emit_case(name, **params):
    items = " ".join("%s=%s" % (k, v) for k, v in params.items())
    out.write("case %s %s\n" % (name, items))


def emit(name, t):
    t = t.detach().reshape(-1)
    if t.dtype in (torch.int32, torch.int64, torch.uint8, torch.bool):
        vals = " ".join(str(int(v)) for v in t.tolist())
    else:
        vals = " ".join("%.9g" % v for v in t.float().tolist())
    out.write("t %s %d %s\n" % (name, t.numel(), vals))


def end():
    out.write("end\n")


def leaf(*shape, scale=1.0):
    return (torch.rand(*shape, dtype=torch.float32) * 2 - 1).mul_(scale).requires_grad_()


def linear(name, N, C, OC, bias):
    torch.manual_seed(len(name) * 7 + N)
    m = torch.nn.Linear(C, OC, bias=bias)
    x = leaf(N, C)
    y = m(x)
    dy = torch.rand(N, OC) * 2 - 1
    y.backward(dy)
    emit_case(name, N=N, C=C, OC=OC, bias=int(bias))
    emit("inp", x)
    emit("weight", m.weight)
    if bias:
        emit("bias", m.bias)
    emit("out", y)
    emit("dout", dy)
    emit("dinp", x.grad)
    emit("dweight", m.weight.grad)
    if bias:
        emit("dbias", m.bias.grad)
    end()


def conv(name, N, C, H, W, OC, KH, KW, SH, SW, PH, PW, bias):
    torch.manual_seed(N * 131 + C * 17 + H + OC)
    m = torch.nn.Conv2d(C, OC, (KH, KW), stride=(SH, SW), padding=(PH, PW), bias=bias)
    x = leaf(N, C, H, W)
    y = m(x)
    dy = torch.rand(y.shape) * 2 - 1
    y.backward(dy)
    emit_case(name, N=N, C=C, H=H, W=W, OC=OC, KH=KH, KW=KW, SH=SH, SW=SW,
              PH=PH, PW=PW, bias=int(bias), OH=y.shape[2], OW=y.shape[3])
    emit("inp", x)
    emit("weight", m.weight)
    if bias:
        emit("bias", m.bias)
    emit("out", y)
    emit("dout", dy)
    emit("dinp", x.grad)
    emit("dweight", m.weight.grad)
    if bias:
        emit("dbias", m.bias.grad)
    end()


def pool(name, kind, N, C, H, W, KH, KW, SH, SW, PH, PW):
    torch.manual_seed(N * 31 + H * 7 + KH)
    x = leaf(N, C, H, W)
    stride = (SH, SW) if SH else None
    if kind == "max":
        y, idx = F.max_pool2d(x, (KH, KW), stride, (PH, PW), return_indices=True)
    else:
        y = F.avg_pool2d(x, (KH, KW), stride, (PH, PW))  # count_include_pad=True
    dy = torch.rand(y.shape) * 2 - 1
    y.backward(dy)
    emit_case(name, N=N, C=C, H=H, W=W, KH=KH, KW=KW, SH=SH, SW=SW, PH=PH,
              PW=PW, OH=y.shape[2], OW=y.shape[3])
    emit("inp", x)
    emit("out", y)
    if kind == "max":
        emit("argmax", idx)
    emit("dout", dy)
    emit("dinp", x.grad)
    end()


def batchnorm(name, shape, training, affine=True):
    torch.manual_seed(sum(shape) * 3 + training)
    C = shape[1]
    m = (torch.nn.BatchNorm2d if len(shape) == 4 else torch.nn.BatchNorm1d)(
        C, eps=1e-5, momentum=0.1, affine=affine)
    with torch.no_grad():
        if affine:
            m.weight.copy_(torch.rand(C) + 0.5)
            m.bias.copy_(torch.rand(C) - 0.5)
        m.running_mean.copy_(torch.rand(C) - 0.5)
        m.running_var.copy_(torch.rand(C) + 0.5)
    rm0, rv0 = m.running_mean.clone(), m.running_var.clone()
    m.train(training)
    x = (torch.rand(*shape) * 3 - 1).requires_grad_()
    y = m(x)
    dy = torch.rand(y.shape) * 2 - 1
    y.backward(dy)
    N, HW = shape[0], (shape[2] * shape[3] if len(shape) == 4 else 1)
    emit_case(name, N=N, C=C, HW=HW, training=int(training), affine=int(affine),
              momentum=0.1, eps=1e-5)
    emit("inp", x)
    if affine:
        emit("weight", m.weight)
        emit("bias", m.bias)
    emit("running_mean_in", rm0)
    emit("running_var_in", rv0)
    emit("out", y)
    emit("running_mean", m.running_mean)
    emit("running_var", m.running_var)
    # the statistics the forward used, in double
    xd = x.detach().double().transpose(0, 1).reshape(C, -1)
    if training:
        mean, var = xd.mean(1), xd.var(1, unbiased=False)
    else:
        mean, var = rm0.double(), rv0.double()
    emit("mean", mean)
    emit("rstd", 1 / torch.sqrt(var + 1e-5))
    emit("dout", dy)
    emit("dinp", x.grad)
    if affine:
        emit("dweight", m.weight.grad)
        emit("dbias", m.bias.grad)
    end()


def layernorm(name, N, C, affine=True):
    torch.manual_seed(N * 5 + C)
    m = torch.nn.LayerNorm(C, eps=1e-5, elementwise_affine=affine)
    if affine:
        with torch.no_grad():
            m.weight.copy_(torch.rand(C) + 0.5)
            m.bias.copy_(torch.rand(C) - 0.5)
    x = (torch.rand(N, C) * 4 - 1).requires_grad_()
    y = m(x)
    dy = torch.rand(y.shape) * 2 - 1
    y.backward(dy)
    emit_case(name, N=N, C=C, affine=int(affine), eps=1e-5)
    emit("inp", x)
    if affine:
        emit("weight", m.weight)
        emit("bias", m.bias)
    emit("out", y)
    xd = x.detach().double()
    emit("mean", xd.mean(1))
    emit("rstd", 1 / torch.sqrt(xd.var(1, unbiased=False) + 1e-5))
    emit("dout", dy)
    emit("dinp", x.grad)
    if affine:
        emit("dweight", m.weight.grad)
        emit("dbias", m.bias.grad)
    end()


def activations():
    torch.manual_seed(99)
    n = 203  # not a multiple of 4: the tails
    base = torch.cat([torch.linspace(-9, 9, 100), torch.rand(100) * 4 - 2,
                      torch.tensor([0.0, 1e-4, -1e-3])])
    for name, fn in [("relu", torch.relu),
                     ("gelu", lambda t: F.gelu(t, approximate="tanh")),
                     ("tanh", torch.tanh), ("sigmoid", torch.sigmoid)]:
        x = base.clone().requires_grad_()
        y = fn(x)
        dy = torch.rand(n) * 2 - 1
        y.backward(dy)
        emit_case(name, n=n)
        emit("inp", x)
        emit("out", y)
        emit("dout", dy)
        emit("dinp", x.grad)
        end()


def dropout():
    torch.manual_seed(5)
    n, p = 101, 0.3
    x = (torch.rand(n) + 0.5).requires_grad_()  # never 0: the mask is out != 0
    y = F.dropout(x, p, training=True)
    dy = torch.rand(n) * 2 - 1
    y.backward(dy)
    emit_case("dropout", n=n, p=p)
    emit("inp", x)
    emit("mask", (y != 0).to(torch.uint8))
    emit("out", y)
    emit("dout", dy)
    emit("dinp", x.grad)
    end()


def embedding():
    torch.manual_seed(11)
    V, C = 7, 5
    m = torch.nn.Embedding(V, C)
    idx = torch.tensor([3, 0, 3, 6, 1, 3, 0, 2, 6, 6, 5], dtype=torch.int64)
    y = m(idx)
    dy = torch.rand(y.shape) * 2 - 1
    y.backward(dy)
    emit_case("embedding", N=idx.numel(), V=V, C=C)
    emit("idx", idx)
    emit("table", m.weight)
    emit("out", y)
    emit("dout", dy)
    emit("dtable", m.weight.grad)
    end()


def attention(name, B, T, C, NH):
    torch.manual_seed(B * 100 + T * 10 + NH)
    qkv = leaf(B, T, 3 * C)
    q, k, v = qkv.split(C, dim=2)
    hs = C // NH
    q = q.view(B, T, NH, hs).transpose(1, 2)
    k = k.view(B, T, NH, hs).transpose(1, 2)
    v = v.view(B, T, NH, hs).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    mask = torch.tril(torch.ones(T, T)).view(1, 1, T, T)
    att = att.masked_fill(mask == 0, float("-inf"))
    att = F.softmax(att, dim=-1)
    y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
    dy = torch.rand(y.shape) * 2 - 1
    y.backward(dy)
    emit_case(name, B=B, T=T, C=C, NH=NH)
    emit("qkv", qkv)
    emit("out", y)
    emit("att", att)
    emit("dout", dy)
    emit("dqkv", qkv.grad)
    end()


def crossentropy(name, N, V, scale, dloss):
    torch.manual_seed(N * 3 + V)
    z = (torch.rand(N, V) * 2 - 1).mul_(scale).requires_grad_()
    y = torch.randint(0, V, (N,))
    loss = F.cross_entropy(z, y)
    (loss * dloss).backward()
    emit_case(name, N=N, V=V, dloss=dloss)
    emit("logits", z)
    emit("targets", y)
    emit("probs", F.softmax(z.detach(), dim=-1))
    emit("loss", loss.reshape(1))
    emit("dlogits", z.grad)
    emit("correct", (z.detach().argmax(1) == y).sum().reshape(1))
    end()


def residual():
    torch.manual_seed(3)
    a, b = leaf(37), leaf(37)
    y = a + b
    dy = torch.rand(37) * 2 - 1
    y.backward(dy)
    emit_case("residual", n=37)
    emit("a", a)
    emit("b", b)
    emit("out", y)
    emit("dout", dy)
    emit("da", a.grad)
    emit("db", b.grad)
    end()


out.write("# loopkit layer kit references: tests/torch/nn_reference.py, torch %s\n"
          % torch.__version__)
linear("linear_bias", 5, 7, 3, True)
linear("linear_nobias", 4, 6, 5, False)
linear("linear_wide", 6, 140, 12, True)  # K > the portable block (128)
conv("conv_s2p1", 2, 3, 7, 6, 4, 3, 3, 2, 2, 1, 1, True)
conv("conv_rect", 2, 2, 6, 7, 3, 2, 3, 1, 2, 1, 0, False)
conv("conv_1x1", 3, 4, 3, 3, 2, 1, 1, 1, 1, 0, 0, True)
conv("conv_chunks", 10, 3, 4, 4, 5, 3, 3, 1, 1, 1, 1, True)    # 8 samples a chunk
conv("conv_groups", 20, 2, 4, 4, 3, 3, 3, 1, 1, 1, 1, True)    # 3 chunks, 3 groups
conv("conv_planes", 3, 2, 12, 12, 2, 3, 3, 1, 1, 1, 1, True)  # 1 sample a chunk
conv("conv_stride3", 2, 2, 11, 9, 2, 4, 3, 3, 2, 2, 1, True)
pool("maxpool_pad", "max", 2, 3, 7, 6, 3, 2, 2, 2, 1, 1)
pool("maxpool_default", "max", 2, 2, 6, 6, 2, 2, 0, 0, 0, 0)
pool("maxpool_overlap", "max", 1, 2, 5, 5, 3, 3, 1, 1, 1, 1)
pool("maxpool_2x2", "max", 2, 3, 12, 18, 2, 2, 0, 0, 0, 0)  # the 2x2 path
pool("maxpool_wide", "max", 2, 2, 15, 20, 3, 3, 2, 2, 1, 1)  # vectors, edges
pool("avgpool_pad", "avg", 2, 3, 7, 6, 3, 3, 2, 2, 1, 1)
pool("avgpool_wide", "avg", 2, 2, 15, 21, 3, 3, 2, 2, 1, 1)
pool("avgpool_default", "avg", 2, 2, 6, 5, 2, 2, 0, 0, 0, 0)
batchnorm("bn2d_train", (4, 3, 5, 4), True)
batchnorm("bn2d_eval", (4, 3, 5, 4), False)
batchnorm("bn1d_train", (8, 5), True)
batchnorm("bn1d_eval", (8, 5), False)
batchnorm("bn1d_noaffine", (6, 70), True, affine=False)
layernorm("layernorm", 10, 8)
layernorm("layernorm_noaffine", 3, 21, affine=False)
activations()
dropout()
embedding()
attention("attention", 2, 5, 8, 2)
attention("attention_blocks", 1, 36, 8, 2)  # two row blocks of the kit
crossentropy("xent", 6, 5, 1.0, 1.0)
crossentropy("xent_scaled", 3, 300, 3.0, 0.5)  # rows longer than 256
crossentropy("xent_extreme", 4, 3, 2000.0, 1.0)  # logits of +-2000
residual()

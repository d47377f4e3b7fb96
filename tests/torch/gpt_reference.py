#!/usr/bin/python3
"""Reference forward and backward passes of the gpt plugin (plugins/model/gpt/gpt.c).

Run with Debian's torch (python3-torch 1.13), no network:

    /usr/bin/python3 tests/torch/gpt_reference.py > tests/data/gpt.ref

The model is nanoGPT's GPT (model.py) as the plugin computes it: the tanh
GELU (GPT-2's; nanoGPT's nn.GELU() is the erf one), the attention's
non-flash path (masked softmax of q k^T / sqrt(hs), times v), the head
tied to transformer.wte, no dropout. Each case builds a tiny model with
nanoGPT's init and then moves every parameter off its init (LayerNorm
weights off 1, biases off 0) so that each one matters, runs it in float32
on the CPU on a batch of random tokens, and writes

    case NAME n_layer=L n_head=H n_embd=C block_size=T vocab_size=V bias=0|1 B=B T=T
    t p.PARAM COUNT V1 V2 ...      every parameter, nanoGPT's state_dict names
    t x COUNT ...                  tokens [B, T]
    t y COUNT ...                  targets [B, T]
    t loss 1 L                     F.cross_entropy over all B x T positions
    t logits_last COUNT ...        logits [B, V] at each sequence's last position
    t g.PARAM COUNT ...            d(loss)/d(param)
    end

(%.9g floats). tests/test_gpt.c reads it, loads the parameters into the
plugin and checks the loss, predict_step's logits and every gradient; it
needs neither torch nor numpy.
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(1)
out = sys.stdout


class LayerNorm(nn.Module):
    """nanoGPT's: nn.LayerNorm with an optional bias."""

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, C, H, bias, block_size):
        super().__init__()
        self.c_attn = nn.Linear(C, 3 * C, bias=bias)
        self.c_proj = nn.Linear(C, C, bias=bias)
        self.n_head = H
        self.register_buffer(
            "mask",
            torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        H = self.n_head
        k = k.view(B, T, H, C // H).transpose(1, 2)
        q = q.view(B, T, H, C // H).transpose(1, 2)
        v = v.view(B, T, H, C // H).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, C, bias):
        super().__init__()
        self.c_fc = nn.Linear(C, 4 * C, bias=bias)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * C, C, bias=bias)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, C, H, bias, block_size):
        super().__init__()
        self.ln_1 = LayerNorm(C, bias)
        self.attn = CausalSelfAttention(C, H, bias, block_size)
        self.ln_2 = LayerNorm(C, bias)
        self.mlp = MLP(C, bias)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, L, H, C, block_size, V, bias):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(V, C),
            wpe=nn.Embedding(block_size, C),
            h=nn.ModuleList([Block(C, H, bias, block_size) for _ in range(L)]),
            ln_f=LayerNorm(C, bias),
        ))
        self.lm_head = nn.Linear(C, V, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * L))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx):
        B, T = idx.size()
        pos = torch.arange(0, T, dtype=torch.long)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def emit(name, t):
    t = t.detach().reshape(-1)
    if t.dtype in (torch.int32, torch.int64):
        vals = " ".join(str(int(v)) for v in t.tolist())
    else:
        vals = " ".join("%.9g" % v for v in t.float().tolist())
    out.write("t %s %d %s\n" % (name, t.numel(), vals))


def case(name, L, H, C, block_size, V, bias, B, T, seed):
    torch.manual_seed(seed)
    m = GPT(L, H, C, block_size, V, bias)
    with torch.no_grad():  # off the init, so that every parameter matters
        for pn, p in m.named_parameters():
            if pn.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
                p.add_(torch.rand_like(p) - 0.5)
            elif pn.endswith("bias"):
                p.copy_((torch.rand_like(p) - 0.5) * 0.2)
            else:
                p.mul_(5)
    x = torch.randint(0, V, (B, T))
    y = torch.randint(0, V, (B, T))
    logits = m(x)
    loss = F.cross_entropy(logits.view(-1, V), y.view(-1))
    loss.backward()
    out.write("case %s n_layer=%d n_head=%d n_embd=%d block_size=%d "
              "vocab_size=%d bias=%d B=%d T=%d\n" %
              (name, L, H, C, block_size, V, int(bias), B, T))
    params = [(n, p) for n, p in m.named_parameters() if n != "lm_head.weight"]
    for n, p in params:
        emit("p." + n, p)
    emit("x", x)
    emit("y", y)
    emit("loss", loss.reshape(1))
    emit("logits_last", logits[:, -1, :])
    for n, p in params:
        emit("g." + n, p.grad)
    out.write("end\n")


out.write("# loopkit gpt references: tests/torch/gpt_reference.py, torch %s\n" %
          torch.__version__)
# T below block_size: positions past T unused (their wpe rows get no
# gradient); B x T not a multiple of anything in particular.
case("gpt_bias", L=2, H=2, C=16, block_size=8, V=37, bias=True, B=3, T=7, seed=1)
case("gpt_nobias", L=3, H=4, C=16, block_size=6, V=29, bias=False, B=2, T=6, seed=2)

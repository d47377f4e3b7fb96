#!/bin/sh
# The activation layers of issue 27 in a sequential net from the config:
# every one of them, named in any case, trains (the loss finite and
# falling, the same at 1 and 2 threads) and passes gradcheck; softmax and
# logsoftmax over an image's channels and over its last dimension; a
# missing or out-of-range dim, the batch's dim, and a beta <= 0 are config
# errors (exit 2) naming the layer; inspect and the unknown-layer message
# list them. Their values against torch: tests/test_activations.c.
. "$LK_SRCDIR/tests/cli/lib.sh"
cd "$T" || exit 1 # errors must leave no runs/ here
REF="$LK_SRCDIR/tests/data/sequential"
# every activation, in any case, in a net that learns its 8 images
NET='conv2d(8, 3, stride=2), SiLU, Softmax(dim=1), flatten, linear(16), LeakyReLU(0.1), linear(16), ELU(alpha=0.5), Softplus(2, 5), linear(16), Mish, Hardswish, linear(16), Hardsigmoid, Identity, linear(3), LogSoftmax(-1)'
# and for gradcheck, softmax and logsoftmax also over an image's channels
# and its last dimension, and over [N, C] at the end
GNET='conv2d(4, 3, stride=2), Softmax(dim=1), conv2d(4, 3), LogSoftmax(-1), flatten, linear(16), SiLU, linear(16), LeakyReLU(0.1), linear(16), ELU(alpha=0.5), linear(16), Softplus(2, 5), linear(16), Mish, linear(16), Hardswish, linear(16), Hardsigmoid, Identity, linear(3), softmax(-1)'

config net <<INI
[loop]
max_steps = 40
seed = 0
[plugins]
step = sequential
optimizer = adam
data = idx
[idx]
dir = $REF
batch_size = 8
shuffle = false
normalize = scale
[sequential]
layers = $NET
[adam]
lr = 0.01
INI
train() { "$LOOPKIT" train "$@" --quiet >"$T/train.out" 2>&1; }
check "a net of every activation trains" train "$T/net.ini" --out "$T/run"
# losses of the training steps, in order
losses() { awk -F, 'NR > 1 && $3 != "" { print $3 }' "$1/metrics.csv"; }
losses "$T/run" >"$T/losses"
check "... 40 losses, every one finite" awk '
  { n++; if ($1 !~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/) bad++ }
  END { exit !(n == 40 && !bad) }' "$T/losses"
check "... and falling: the last below the first by a tenth" awk '
  NR == 1 { first = $1 } { last = $1 }
  END { exit !(last < 0.9 * first) }' "$T/losses"
check "the same losses at 2 threads, bit for bit" sh -c "
  '$LOOPKIT' train '$T/net.ini' --quiet --out '$T/run2' --set loop.threads=2 >/dev/null 2>&1 &&
  awk -F, 'NR > 1 && \$3 != \"\" { print \$3 }' '$T/run2/metrics.csv' | cmp -s - '$T/losses'"
check "... where 1 thread was asked first" sh -c "
  '$LOOPKIT' train '$T/net.ini' --quiet --out '$T/run1' --set loop.threads=1 >/dev/null 2>&1 &&
  awk -F, 'NR > 1 && \$3 != \"\" { print \$3 }' '$T/run1/metrics.csv' | cmp -s - '$T/losses'"

check "identity first, inside and last changes nothing: the losses of the net without it" sh -c "
  '$LOOPKIT' train '$T/net.ini' --quiet --out '$T/plain' --set 'sequential.layers=flatten, linear(3)' >/dev/null 2>&1 &&
  '$LOOPKIT' train '$T/net.ini' --quiet --out '$T/ident' --set 'sequential.layers=Identity, flatten, identity, linear(3), identity' >/dev/null 2>&1 &&
  awk -F, 'NR > 1 && \$3 != \"\" { print \$3 }' '$T/plain/metrics.csv' >'$T/l.plain' &&
  awk -F, 'NR > 1 && \$3 != \"\" { print \$3 }' '$T/ident/metrics.csv' >'$T/l.ident' &&
  test -s '$T/l.plain' && cmp -s '$T/l.plain' '$T/l.ident'"

# ---- gradcheck: every backward against central differences ----------------
expect 0 '^gradcheck: passed \(tolerance 0\.01 for f32\)$' "gradcheck passes on the net of every activation" \
  -- gradcheck "$T/net.ini"
check "... every parameter reported, none over" sh -c "grep -q '^15\.bias ' '$T/out' && ! grep -q over '$T/out'"
expect 0 '^gradcheck: passed \(tolerance 0\.01 for f32\)$' "... and on one with softmaxes over an image's channels and last dimension" \
  -- gradcheck "$T/net.ini" --set "sequential.layers=$GNET"
check "... every parameter reported, none over" sh -c "grep -q '^20\.bias ' '$T/out' && ! grep -q over '$T/out'"
expect 0 '^gradcheck: passed' "... and with the other argument forms (the defaults, keywords, a negative slope)" \
  -- gradcheck "$T/net.ini" --set 'sequential.layers=flatten, linear(12), leakyrelu, linear(12), leakyrelu(negative_slope=-0.3), linear(12), elu, linear(12), elu(2.0), linear(12), softplus, linear(12), softplus(beta=0.5, threshold=1.0), linear(3), logsoftmax(dim=1)'

# ---- errors -----------------------------------------------------------------
bad() { # LAYERS PATTERN DESC
  expect 2 "$2" "$3" -- train "$T/net.ini" --out "$T/bad" --set "sequential.layers=$1"
}
bad 'flatten, linear(3), softmax' 'layer 2 "softmax": softmax needs dim' \
  "softmax without dim: exit 2 naming the layer"
bad 'flatten, linear(3), LogSoftmax()' 'layer 2 "LogSoftmax\(\)": logsoftmax needs dim' \
  "logsoftmax() without dim: exit 2 naming the layer"
bad 'flatten, linear(3), softmax(2)' 'layer 2 \(softmax\): dim 2 out of range for an input of 2 dimensions with the batch \(\[3\] per sample\): expected -2 to 1' \
  "softmax(2) on [N, 3]: out of range, exit 2 naming the layer"
bad 'conv2d(2, 3), logsoftmax(-5)' 'layer 1 \(logsoftmax\): dim -5 out of range' \
  "logsoftmax(-5) on [N, C, H, W]: out of range, exit 2"
bad 'flatten, linear(3), softmax(0)' "layer 2 \(softmax\): dim 0 is the batch's" \
  "softmax(0), the batch's dim: exit 2 naming the layer"
bad 'flatten, linear(3), softplus(beta=-1)' 'layer 2 "softplus\(beta=-1\)": beta = -1: must be > 0' \
  "softplus with a negative beta: exit 2 naming the layer"
bad 'flatten, softplus(0), linear(3)' 'layer 1 "softplus\(0\)": beta = 0: must be > 0' \
  "softplus with beta 0: exit 2"
bad 'flatten, leakyrelu(slope=0.1), linear(3)' 'layer 1 "leakyrelu\(slope=0.1\)": leakyrelu takes no argument slope \(it takes: negative_slope\)' \
  "leakyrelu with torch's name of the argument only"
bad 'flatten, elu(1, 2), linear(3)' 'layer 1 "elu\(1, 2\)": elu takes 1 positional argument' \
  "elu with two arguments: exit 2"
bad 'flatten, identity(1), linear(3)' 'identity takes 0 positional arguments' \
  "identity takes no argument"
bad 'flatten, swish, linear(3)' 'unknown layer swish; expected one of conv2d, .*, silu, leakyrelu, elu, softplus, mish, hardswish, hardsigmoid, softmax, logsoftmax, identity' \
  "an unknown layer: the message lists the activations"
check "none of the refused runs wrote a run directory" test ! -e "$T/bad"

# ---- listed -------------------------------------------------------------------
expect 0 'embedding, silu, leakyrelu, elu, softplus, mish, hardswish, hardsigmoid, softmax\(dim\), logsoftmax\(dim\), identity' \
  "inspect sequential lists them" -- inspect sequential
finish

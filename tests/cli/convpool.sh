#!/bin/sh
# The convolutions and pools of issue 27 item 1 in sequential nets from the
# config: conv1d (stride, padding, dilation, groups, depthwise, no bias)
# with maxpool1d, avgpool1d and adaptiveavgpool1d on sequences [C, L]
# (tests/data/convpool, .npy), and conv2d's dilation and groups with
# adaptiveavgpool2d on images (tests/data/sequential): each net trains (the
# loss falling, the same at 1 and 2 threads), passes gradcheck, and the
# shapes and sizes that cannot work are config errors (exit 2) naming the
# layer. Their values against torch: tests/test_convpool.c.
. "$LK_SRCDIR/tests/cli/lib.sh"
cd "$T" || exit 1 # errors must leave no runs/ here
SEQ="$LK_SRCDIR/tests/data/convpool"
IMG="$LK_SRCDIR/tests/data/sequential"
SNET='Conv1d(8, 3, padding=1), relu, conv1d(8, 3, dilation=2, groups=4, padding=2), conv1d(8, 1, groups=8, bias=false), tanh, maxpool1d(2), avgpool1d(3, 1, 1), conv1d(8, 3, 2, 1), adaptiveavgpool1d(3), flatten, linear(3)'
INET='conv2d(8, 3, padding=1), relu, conv2d(8, 3, padding=2, dilation=2, groups=8), conv2d(16, 1, groups=2), tanh, adaptiveavgpool2d(3), conv2d(8, (1, 3), dilation=(1, 2), padding=(0, 2)), AdaptiveAvgPool2d(1), flatten, linear(3)'

config seq <<INI
[loop]
max_steps = 60
seed = 0
[plugins]
step = sequential
optimizer = adam
data = npy
[npy]
x = $SEQ/seq_x.npy
y = $SEQ/seq_y.npy
batch_size = 16
[sequential]
layers = $SNET
[adam]
lr = 0.01
INI
config img <<INI
[loop]
max_steps = 40
seed = 0
[plugins]
step = sequential
optimizer = adam
data = idx
[idx]
dir = $IMG
batch_size = 8
shuffle = false
normalize = scale
[sequential]
layers = $INET
[adam]
lr = 0.01
INI
train() { "$LOOPKIT" train "$@" --quiet >"$T/train.out" 2>&1; }
losses() { awk -F, 'NR > 1 && $3 != "" { print $3 }' "$1/metrics.csv"; }
falls() { # RUN N: N finite losses, the last below 0.9 of the first
  losses "$1" | awk -v want="$2" '
    { n++; if ($1 !~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/) bad++ }
    NR == 1 { first = $1 } { last = $1 }
    END { exit !(n == want && !bad && last < 0.9 * first) }'
}
same2() { # NAME: the losses at 2 threads are those at 1, bit for bit
  train "$T/$1.ini" --out "$T/$1-1" --set loop.threads=1 &&
    train "$T/$1.ini" --out "$T/$1-2" --set loop.threads=2 &&
    losses "$T/$1-1" >"$T/l1" && losses "$T/$1-2" >"$T/l2" &&
    test -s "$T/l1" && cmp -s "$T/l1" "$T/l2"
}

check "conv1d, maxpool1d, avgpool1d, adaptiveavgpool1d on sequences: trains" \
  train "$T/seq.ini" --out "$T/seq"
check "... 60 finite losses, falling by a tenth" falls "$T/seq" 60
check "... the same losses at 1 and 2 threads" same2 seq
check "conv2d with dilation, groups, depthwise, adaptiveavgpool2d: trains" \
  train "$T/img.ini" --out "$T/img"
check "... 40 finite losses, falling by a tenth" falls "$T/img" 40
check "... the same losses at 1 and 2 threads" same2 img

# ---- gradcheck ---------------------------------------------------------------
expect 0 '^gradcheck: passed' "gradcheck passes on the sequence net" \
  -- gradcheck "$T/seq.ini"
check "... every parameter reported (the depthwise one without bias too), none over" \
  sh -c "grep -q '^10\.bias ' '$T/out' && grep -q '^3\.weight ' '$T/out' && ! grep -q '^3\.bias ' '$T/out' && ! grep -q over '$T/out'"
expect 0 '^gradcheck: passed' "gradcheck passes on the image net" \
  -- gradcheck "$T/img.ini"
check "... every parameter reported, none over" \
  sh -c "grep -q '^2\.weight ' '$T/out' && grep -q '^9\.bias ' '$T/out' && ! grep -q over '$T/out'"

# ---- errors: exit 2 at create, naming the layer -------------------------------
bad() { # INI LAYERS PATTERN DESC
  expect 2 "$3" "$4" -- train "$T/$1.ini" --out "$T/bad" --set "sequential.layers=$2"
}
bad seq 'conv1d(6, 3, groups=4), flatten, linear(3)' \
  'layer 0 \(conv1d\): groups = 4 must divide the input.s channels \(2, input \[2, 16\]\) and out_channels \(6\)' \
  "conv1d: groups not dividing the channels"
bad img 'conv2d(6, 3, groups=4), flatten, linear(3)' \
  'layer 0 \(conv2d\): groups = 4 must divide' \
  "conv2d: groups not dividing the channels"
bad seq 'adaptiveavgpool1d(17), flatten, linear(3)' \
  'layer 0 \(adaptiveavgpool1d\): output_size 17 is longer than the input \[2, 16\]' \
  "adaptiveavgpool1d longer than its input"
bad img 'adaptiveavgpool2d((2, 9)), flatten, linear(3)' \
  'layer 0 \(adaptiveavgpool2d\): output_size 2 x 9 is larger than the input \[1, 8, 8\]' \
  "adaptiveavgpool2d larger than its input"
bad seq 'conv1d(4, 3, dilation=8), flatten, linear(3)' \
  'layer 0 \(conv1d\): input \[2, 16\], kernel 3 with padding 0 and dilation 8: the kernel is larger than the padded sequence' \
  "conv1d: a dilated kernel longer than the sequence"
bad seq 'maxpool1d(20), flatten, linear(3)' \
  'layer 0 \(maxpool1d\): input \[2, 16\], window 20 with padding 0: the window is larger than the padded sequence' \
  "maxpool1d: a window longer than the sequence"
bad img 'conv1d(4, 3), flatten, linear(3)' \
  'layer 0 \(conv1d\): input \[1, 8, 8\]; expected a sequence \[C, L\]' \
  "conv1d on an image"
bad seq 'maxpool1d(4, padding=3), flatten, linear(3)' \
  'layer 0 \(maxpool1d\): padding 3 for a window of 4: at most half' \
  "maxpool1d: too much padding"
bad seq 'avgpool1d((2, 2)), flatten, linear(3)' 'avgpool1d' \
  "avgpool1d takes a length, not a pair"
check "none of the refused runs wrote a run directory" test ! -e "$T/bad"

# ---- listed -------------------------------------------------------------------
expect 0 'conv1d, .*maxpool1d, avgpool1d, adaptiveavgpool1d, adaptiveavgpool2d' \
  "inspect sequential lists them" -- inspect sequential
finish

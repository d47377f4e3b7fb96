#!/bin/sh
# The sequential plugin: a network from the config's layers option, held
# against torch (tests/data/sequential, written by
# tests/torch/sequential_reference.py), its gradients against differences,
# its errors, names, resume and determinism, and the Fashion-MNIST CNN of
# examples/fashion-mnist-cnn.ini on a slice.
. "$LK_SRCDIR/tests/cli/lib.sh"
cd "$T" || exit 1 # errors must leave no runs/ here
REF="$LK_SRCDIR/tests/data/sequential"
LAYERS=$(sed -n 's/^layers //p' "$REF/reference.txt")
train() { "$LOOPKIT" train "$@" --quiet >"$T/train.out" 2>&1; }
dump() { "$LOOPKIT" dump "$1/checkpoints/last.ckpt"; }

# ---- 1. two SGD steps and a test of every layer, against torch ----------

config ref <<INI
[loop]
max_epochs = 1
[plugins]
step = sequential
optimizer = sgd
data = idx
[idx]
dir = $REF
batch_size = 4
shuffle = false
normalize = scale
[sequential]
layers = $LAYERS
init = $REF/init.f32
[sgd]
lr = 0.1
INI
check "the reference network trains" train "$T/ref.ini" --out "$T/ref"
# what loopkit gave, in reference.txt's layout
{
  python3 "$LK_SRCDIR/tests/cli/ckpt_edit.py" "$T/ref/checkpoints/last.ckpt" --dump
  awk -F, 'NR > 1 && $3 != "" { printf "loss[%d] %s\n", $1 + 1, $3 }
    NR > 1 && $5 != "" { printf "test_loss[0] %s\ntest_acc[0] %s\n", $5, $6 }' \
    "$T/ref/metrics.csv"
} >"$T/mine.txt"
# close REFERENCE MINE: every value of the reference within 1e-5 + 1e-4
# |value| (f32 sums in other orders), none missing.
close() {
  awk 'NR == FNR { got[$1] = $2; next }
    /^#/ || $1 == "layers" { next }
    { n++; if (!($1 in got)) { print "# missing " $1; bad++; next }
      d = got[$1] - $2; d = d < 0 ? -d : d; a = $2 < 0 ? -$2 : $2
      if (d > 1e-5 + 1e-4 * a) { print "# " $1 ": " got[$1] ", torch " $2; bad++ } }
    END { print "# " n " values compared"; exit bad > 0 || n < 1000 }' "$2" "$1"
}
check "losses, parameters after two steps, batch norm's running statistics and the test in eval mode are torch's" \
  close "$REF/reference.txt" "$T/mine.txt"
check "num_batches_tracked counts the two batches" \
  grep -qx 'sequential.12.num_batches_tracked\[0\] 2' "$T/mine.txt"

check "init from a safetensors file by name: the same run, bit for bit" \
  train "$T/ref.ini" --set sequential.init="$REF/init.safetensors" --out "$T/ref-st"
check "... the same parameters" sh -c "'$LOOPKIT' dump '$T/ref/checkpoints/last.ckpt' >'$T/d1' && '$LOOPKIT' dump '$T/ref-st/checkpoints/last.ckpt' | cmp -s - '$T/d1'"
expect 2 'init.*safetensors' "a safetensors file of another network is refused" \
  -- train "$T/ref.ini" --set sequential.init="$REF/init.safetensors" \
  --set "sequential.layers=flatten, linear(3)"

# ---- 2. gradients against central differences ----------------------------
# Smooth layers only: a step across a kink of ReLU or a max (|z| < h)
# makes the difference quotient wrong, not the backward; section 1 checks
# those exactly. f32 differences are good to ~1e-2; a wrong term is O(1).
grep -v '^init' "$T/ref.ini" >"$T/gc.ini"
expect 0 '^0\.weight +[0-9.e-]+ +40 *$' "gradcheck: conv2d, tanh, linear within 1e-2" \
  -- gradcheck "$T/gc.ini" --tolerance 1e-2 \
  --set "sequential.layers=conv2d(3, 3, stride=2), tanh, flatten, linear(3)"
expect 0 '^6\.weight +[0-9.e-]+ +16 *$' "gradcheck: avgpool2d, gelu, layernorm, batchnorm1d, sigmoid within 5e-2" \
  -- gradcheck "$T/gc.ini" --tolerance 5e-2 \
  --set "sequential.layers=conv2d(3, 3, stride=2), tanh, avgpool2d(2, padding=1), flatten, linear(8), gelu, layernorm, batchnorm1d, sigmoid, linear(3)"
check "gradcheck: the batch norm's parameters are checked" grep -Eq '^7\.bias ' "$T/out"

# ---- 3. errors: exit 2 at create, naming the layer and the shapes --------

refused() { # DESC PATTERN LAYERS
  expect 2 "layers: layer $2" "$1" -- train "$T/gc.ini" --set "sequential.layers=$3"
}
refused "linear's in_features against a flatten's output" \
  '1 \(linear\): in_features = 100, but its input is \[64\]' \
  'flatten, linear(in_features=100, out_features=3)'
refused "a pool larger than the image" \
  '0 \(maxpool2d\): input \[1, 8, 8\], window 9 x 9 .*larger than the padded image' \
  'maxpool2d(9), flatten, linear(3)'
refused "a kernel larger than the image" \
  '1 \(conv2d\): input \[1, 4, 4\], kernel 5 x 5 .*larger than the padded image' \
  'maxpool2d(2, padding=0), conv2d(2, 5), flatten, linear(3)'
refused "the last layer's width against the classes" \
  '1 \(linear\): output \[10\], but the data has 3 classes' 'flatten, linear(10)'
refused "an output that is not a vector" \
  '0 \(linear\): output \[1, 8, 3\], .* \(a flatten before it\?\)' 'linear(3)'
refused "conv2d after a flatten" '1 \(conv2d\): input \[64\]; expected an image' \
  'flatten, conv2d(4, 3), flatten, linear(3)'
refused "in_channels against the data's channels" \
  '0 \(conv2d\): in_channels = 3, but its input is \[1, 8, 8\]' \
  'conv2d(4, 3, in_channels=3), flatten, linear(3)'
refused "batchnorm1d on an image" '0 \(batchnorm1d\): input \[1, 8, 8\]; expected \[C\] or \[C, L\]' \
  'batchnorm1d, flatten, linear(3)'
refused "batchnorm2d on a vector" '1 \(batchnorm2d\): input \[64\]' \
  'flatten, batchnorm2d, linear(3)'
refused "layernorm's normalized_shape" '0 \(layernorm\): normalized_shape = 5, but its input is \[1, 8, 8\]' \
  'layernorm(normalized_shape=5), flatten, linear(3)'
refused "flatten of the batch" '0 \(flatten\): start_dim 0 would merge the batch' \
  'flatten(0), linear(3)'
refused "a pool's padding over half its window" '0 \(maxpool2d\): padding 2 x 2 for a window of 2 x 2' \
  'maxpool2d(2, padding=2), flatten, linear(3)'
# syntax: the option, the layer's index and its text
refused "an unknown layer" '1 "maxpol2d\(2\)": unknown layer maxpol2d; expected one of conv2d, ' \
  'relu, maxpol2d(2)'
refused "an unknown argument" '0 "conv2d\(4, 3, pad=1\)": conv2d takes no argument pad \(it takes: out_channels, kernel_size, stride, padding, bias, in_channels, dilation, groups\)' \
  'conv2d(4, 3, pad=1), flatten, linear(3)'
refused "a malformed value" '0 "conv2d\(4, x\)": kernel_size = x: expected a whole number or a pair' \
  'conv2d(4, x), flatten, linear(3)'
refused "unbalanced parentheses" '2 "linear\(3": unbalanced parentheses' \
  'conv2d(4, 3), flatten, linear(3'
refused "an empty layer" '1 is empty' 'flatten,, linear(3)'
refused "a positional argument after a keyword" '0 "conv2d\(stride=1, 4, 3\)": positional argument 4 after a keyword' \
  'conv2d(stride=1, 4, 3), flatten, linear(3)'
refused "a missing argument" '0 "conv2d\(4\)": conv2d needs kernel_size' 'conv2d(4), flatten, linear(3)'
refused "too many positional arguments" '1 "dropout\(0.1, 0.2\)": dropout takes 1 positional argument' \
  'flatten, dropout(0.1, 0.2), linear(3)'
refused "an argument given twice" '2 "linear\(3, out_features=3\)": out_features given twice' \
  'flatten, relu, linear(3, out_features=3)'
refused "dropout's p out of range" '1 "dropout\(1.5\)": p = 1.5: must be in \[0, 1\)' \
  'flatten, dropout(1.5), linear(3)'
refused "gelu without tanh" "1 \"gelu\\(approximate=none\\)\": approximate = none: only 'tanh'" \
  'flatten, gelu(approximate=none), linear(3)'
refused "text after a layer" '1 "relu x": expected relu or relu\(ARGUMENTS\)' 'flatten, relu x, linear(3)'
grep -v '^layers' "$T/gc.ini" >"$T/nolayers.ini"
expect 2 'layers' "layers is required" -- train "$T/nolayers.ini"
config nodata <<INI
[loop]
max_steps = 1
[plugins]
step = sequential
optimizer = sgd
[sequential]
layers = flatten, linear(3)
[sgd]
lr = 0.001
INI
expect 2 "sizes itself from the data's sample shape" "without data it cannot size itself" -- train "$T/nodata.ini"
awk 'BEGIN { OFS = ","; print "a,b,y"; for (i = 0; i < 8; i++) print i, i * 2, i / 3 }' >reg.csv
config reg <<INI
[plugins]
step = sequential
optimizer = sgd
data = csv
[csv]
path = $T/reg.csv
labels = float
[sequential]
layers = linear(1)
[sgd]
lr = 0.001
INI
expect 2 "the data's targets are not class labels" "regression targets are refused" -- train "$T/reg.ini"
expect 2 'init ".*/t10k-labels-idx1-ubyte": expected 7076 bytes' "an init file of the wrong size" \
  -- train "$T/ref.ini" --set sequential.init="$REF/t10k-labels-idx1-ubyte"
check "nothing refused left a run directory" test ! -e "$T/runs"

# ---- 4. names and state, as torch's nn.Sequential ------------------------

python3 "$LK_SRCDIR/tests/cli/ckpt_edit.py" "$T/ref/checkpoints/last.ckpt" --dump |
  sed 's/\[.*//' | uniq >"$T/names"
printf '%s\n' 0.weight 0.bias 1.weight 1.bias 4.weight 4.bias 9.weight 9.bias \
  10.weight 10.bias 12.weight 12.bias 13.weight 13.bias \
  sequential.1.running_mean sequential.1.running_var \
  sequential.1.num_batches_tracked sequential.12.running_mean \
  sequential.12.running_var sequential.12.num_batches_tracked >"$T/want"
check "loopkit dump names every parameter and state as torch does" \
  sh -c "grep -vx 'host.*' '$T/names' | grep -v '^sgd' | grep -Fxf '$T/want' | cmp -s - '$T/want'"

# ---- 5. resume mid-epoch with dropout and batch norm, and threads --------

config rs <<INI
[loop]
max_epochs = 2
checkpoint_every_n_steps = 3
threads = 2
[plugins]
step = sequential
optimizer = adam
data = idx
profiler = killer
[idx]
dir = $REF
batch_size = 2
normalize = scale
[sequential]
layers = conv2d(4, 3, padding=1), batchnorm2d, relu, maxpool2d(2), flatten, dropout(0.3), linear(8), batchnorm1d, dropout(0.5), linear(3)
INI
train "$T/rs.ini" --out "$T/rs-ref"
LK_KILL=optimizer_step:6 train "$T/rs.ini" --out "$T/rs-kill"
check "killed mid-epoch after a step's checkpoint" test -e "$T/rs-kill/checkpoints/last.ckpt"
check "the resumed run trains" train "$T/rs.ini" --resume "$T/rs-kill/checkpoints/last.ckpt" --out "$T/rs-res"
"$LOOPKIT" dump "$T/rs-ref/checkpoints/last.ckpt" >"$T/a"
"$LOOPKIT" dump "$T/rs-res/checkpoints/last.ckpt" >"$T/b"
check "resumed mid-epoch, the parameters, running statistics and dropout draws are the uninterrupted run's, bit for bit" \
  cmp -s "$T/a" "$T/b"
check "... and so are its losses" sh -c "tail -n 4 '$T/rs-ref/metrics.csv' >'$T/m1' && tail -n 4 '$T/rs-res/metrics.csv' | cmp -s - '$T/m1'"
train "$T/rs.ini" --out "$T/rs-again"
check "threads = 2 twice: the same bits" sh -c "'$LOOPKIT' dump '$T/rs-again/checkpoints/last.ckpt' | cmp -s - '$T/a'"
train "$T/rs.ini" --out "$T/rs-one" --set loop.threads=1
check "threads = 1: the same bits as 2" sh -c "'$LOOPKIT' dump '$T/rs-one/checkpoints/last.ckpt' | cmp -s - '$T/a'"
train "$T/rs.ini" --out "$T/rs-seed" --set loop.seed=1
check "another seed draws other weights and masks" sh -c "! '$LOOPKIT' dump '$T/rs-seed/checkpoints/last.ckpt' | cmp -s - '$T/a'"

# ---- 6. the Fashion-MNIST CNN of the example, on a slice -----------------

CNN="$LK_SRCDIR/examples/fashion-mnist-cnn.ini"
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  ok "fashion-mnist-cnn # SKIP dataset-fashion-mnist is not installed"
elif [ -n "${LK_LOOPKIT:-}" ] || [ -n "${LK_SANITIZE:-}" ]; then
  ok "fashion-mnist-cnn # SKIP too slow under valgrind or the sanitizers"
else
  check "the CNN example trains one epoch of 2000 images" \
    train "$CNN" --set loop.max_epochs=1 --set idx.limit=2000 --out "$T/cnn"
  check "... to a test accuracy well above chance (> 0.6)" \
    awk -F, 'NR > 1 && $5 != "" { a = $6 } END { print "# test_acc " a; exit !(a > 0.6) }' "$T/cnn/metrics.csv"
  "$LOOPKIT" dump "$T/cnn/checkpoints/last.ckpt" | sed 's/\[.*//' | uniq |
    grep -v '^adam\|^host' >"$T/cnn.names"
  printf '%s\n' 0.weight 0.bias 3.weight 3.bias 7.weight 7.bias 9.weight 9.bias >"$T/cnn.want"
  check "the CNN's parameters are named as torch's nn.Sequential's" cmp -s "$T/cnn.names" "$T/cnn.want"
fi
finish

#!/bin/sh
# Shape arithmetic that cannot wrap (issue 23, item 4) and the data's
# impossible sample shapes named (item 7). On 52dddba a sample of 2^32
# values (a sparse 4 GiB uint8 .npy with x_shape = 65536,65536, or a data
# plugin's declared shape) wrapped to 0 in sequential's flatten and died
# of SIGFPE at create; the host's "impossible sample shape" was hidden
# behind sequential's generic message and ignored by mlp, linear and
# softmax (which multiplied the shape themselves: four dimensions of 2^24
# made "0 features"); sequential's layer messages that quote the kit's
# were garbled (lk_fail formatting into the buffer it read); a parameter
# of 2^64 - 8 bytes was given a block of 64, lstsq's A of 2^65 bytes one
# of malloc(0). Each is now a config error
# (exit 2, nothing made) naming the layer or the data plugin and the
# shape.
# The declared test plugin says any shape and holds no samples.
. "$LK_SRCDIR/tests/cli/lib.sh"

# refused DESC PATTERN -- ARGS: train exits 2 naming PATTERN, and makes no
# run directory ($T/run).
refused() {
  desc=$1 pattern=$2
  shift 3
  rm -rf "$T/run"
  expect 2 "$pattern" "$desc" -- train "$@" --out "$T/run"
  check "... and makes no run directory" test ! -e "$T/run"
}

config seq <<INI
[loop]
max_steps = 1
[plugins]
step = sequential
optimizer = sgd
data = declared
[declared]
x_shape = 65536,65536
[sequential]
layers = flatten, linear(2)
[sgd]
lr = 0.1
INI

# ---- a sample of 2^32 values -------------------------------------------
refused "declared [65536, 65536] into flatten: refused, naming the layer and the shape" \
  'layers: layer 0 \(flatten\): input \[65536, 65536\]: too large \(4294967296 values a sample, more than 2\^30\)' \
  -- "$T/seq.ini"
refused "... into linear" \
  'layers: layer 0 \(linear\): input \[65536, 65536\]: too large \(4294967296' \
  -- "$T/seq.ini" --set sequential.layers='linear(2)'
refused "... a dimension past 2^24: named with the data's shape" \
  "the data's samples are f32 \\[16777217, 1\\]: dimension 0 is 16777217, more than 2\\^24" \
  -- "$T/seq.ini" --set declared.x_shape=16777217,1

# The sparse file: 128 bytes of header and 2^32 of zeros, (1, 2^32) uint8
# read as samples of [65536, 65536] (nothing of it is read at create).
npy() { # npy FILE DESCR SHAPE DATA_BYTES
  d="{'descr': '$2', 'fortran_order': False, 'shape': $3, }"
  pad=$((118 - ${#d} - 1))
  { printf '\223NUMPY\001\000\166\000%s%*s\n' "$d" "$pad" ''; } >"$1"
  truncate -s $((128 + $4)) "$1"
}
if npy "$T/x.npy" '|u1' '(1, 4294967296)' 4294967296 2>/dev/null &&
  [ "$(wc -c <"$T/x.npy")" -eq 4294967424 ] &&
  [ "$(du -k "$T/x.npy" | cut -f1)" -lt 1024 ]; then
  npy "$T/y.npy" '<i8' '(1,)' 8
  config sparse <<INI
[loop]
max_steps = 1
[plugins]
step = sequential
optimizer = sgd
data = npy
[npy]
x = $T/x.npy
y = $T/y.npy
x_shape = 65536,65536
num_classes = 2
batch_size = 1
[sequential]
layers = flatten, linear(2)
[sgd]
lr = 0.1
INI
  refused "a sparse 4 GiB uint8 .npy with x_shape = 65536,65536: refused at create, not SIGFPE" \
    'layers: layer 0 \(flatten\): input \[65536, 65536\]: too large' -- "$T/sparse.ini"
else
  echo "ok $((n += 1)) - a sparse 4 GiB .npy # SKIP no sparse files in $T"
fi

# ---- impossible sample shapes: the host's message, passed on -----------
big=16777216,16777216,16777216,16777216
refused "sequential: an x of more bytes than a size_t counts names the data plugin and its shape" \
  "sizes itself from the data's sample shape: shape of data plugin declared: an impossible sample shape, x f32 \\[16777216, 16777216, 16777216, 16777216\\], y i32 \\[\\] \\(2 classes\\): a sample of x holds more bytes than a size_t counts" \
  -- "$T/seq.ini" --set declared.x_shape=$big
for model in mlp softmax; do
  refused "$model: the same, not ignored" \
    "plugin $model .*failed to start: the data's sample shape: shape of data plugin declared: an impossible sample shape, x f32 \\[16777216, 16777216, 16777216, 16777216\\]" \
    -- "$T/seq.ini" --set declared.x_shape=$big --set plugins.step=$model \
    --set sequential.layers=
done
refused "a dimension of 0: impossible" \
  'shape of data plugin declared: an impossible sample shape, x f32 \[4, 0\], .*: a dimension of 0 in x' \
  -- "$T/seq.ini" --set declared.x_shape=4,0
refused "five dimensions: impossible" \
  'shape of data plugin declared: an impossible sample shape, x f32 of 5 dimensions, .*: more than 4 dimensions' \
  -- "$T/seq.ini" --set declared.x_shape=1,1,1,1,1
refused "gpt: the same, named" \
  'plugin gpt .*failed to start: shape of data plugin declared: an impossible sample shape, x i32 \[4, 0\]' \
  -- "$T/seq.ini" --set declared.x_shape=4,0 --set declared.x_dtype=i32 \
  --set plugins.step=gpt --set sequential.layers=

# ---- a parameter of 2^64 - 8 bytes -------------------------------------
# linreg's weight, f64 [2^61 - 1]: the 64-byte round-up wrapped to 0, and
# 52dddba gave it a block of 64 bytes.
config big <<INI
[loop]
max_steps = 1
[plugins]
step = linreg
optimizer = sgd
[sgd]
lr = 0.1
INI
refused "a parameter of 2^64 - 8 bytes: out of memory, not 64 bytes" \
  'plugin linreg: out of memory for parameter weight \(2305843009213693951 elements of f64\)' \
  -- "$T/big.ini" --set linreg.features=2305843009213693951
refused "... and of 2^64 bytes: its shape named" \
  'plugin linreg: parameter "weight" of shape \[2305843009213693952\]: more bytes than memory can address' \
  -- "$T/big.ini" --set linreg.features=2305843009213693952

# lstsq's A [m, n] of doubles: 2 x 2^61 x 8 bytes wrapped to 0, and
# 52dddba filled a block of malloc(0) with 2^62 values.
config lstsq <<INI
[loop]
max_steps = 1
[plugins]
step = lstsq
optimizer = sgd
[sgd]
lr = 0.1
INI
refused "lstsq's A of 2^65 bytes: refused, naming m and n" \
  'plugin lstsq .*failed to start: m = 2 and n = 2305843009213693952: A \[m, n\] holds more bytes than a size_t counts' \
  -- "$T/lstsq.ini" --set lstsq.m=2 --set lstsq.n=2305843009213693952

# ---- a layer's message quoting the kit's, whole ------------------------
# conv2d(65536, 1) on [65536, 1, 1]: the weight's 2^32 values are too
# large for the kit, whose message sequential quotes (lk_fail formatting
# into the buffer it read garbled it).
refused "sequential quotes the kit's message whole" \
  'layers: layer 0 \(conv2d\): input \[65536, 1, 1\]: conv2d: input \[1, 65536, 1, 1\], weight \[65536, 65536, 1, 1\], stride 1 x 1, padding 0 x 0, dilation 1 x 1, groups 1: too large' \
  -- "$T/seq.ini" --set declared.x_shape=65536,1,1 \
  --set sequential.layers='conv2d(65536, 1), flatten, linear(2)'
finish

#!/bin/sh
# The npy data plugin through loopkit train, on the files numpy 1.24 wrote
# (tests/data/npy, made by tests/data/npy/make.py): every dtype, byte
# order, header version and .npz form of one data set trains to the same
# bits; the samples' shape reaches mlp and sequential; shuffling, resume,
# splits from files or fractions; the same bits as csv on iris; each
# refusal names the file and the header field, with exit status 2; and a
# sparse file larger than the machine's memory trains, mapped, in little
# memory. tests/test_npy.c checks the parser and the batches' values.
. "$LK_SRCDIR/tests/cli/lib.sh"
cd "$T" || exit 1 # errors must leave no runs/ here
D=$LK_SRCDIR/tests/data/npy

train() { "$LOOPKIT" train "$@" --quiet >"$T/train.out" 2>&1; }
# weights A B: two runs end with the same parameters (loopkit dump).
weights() {
  "$LOOPKIT" dump "$1/checkpoints/last.ckpt" >"$T/eq1" 2>&1 &&
    "$LOOPKIT" dump "$2/checkpoints/last.ckpt" >"$T/eq2" 2>&1 &&
    cmp -s "$T/eq1" "$T/eq2"
}
# equal A B: ... and the same metrics.csv.
equal() { weights "$1" "$2" && cmp -s "$1/metrics.csv" "$2/metrics.csv"; }

# ---- 1. one data set, every encoding: the same run, bit for bit --------

config blobs <<INI
[loop]
max_epochs = 3
seed = 1
[plugins]
step = mlp
optimizer = sgd
data = npy
[npy]
x = $D/x.npy
y = $D/y.npy
val_x = $D/val_x.npy
val_y = $D/val_y.npy
test_x = $D/test_x.npy
test_y = $D/test_y.npy
batch_size = 16
[mlp]
layers = 4,16,3
[sgd]
lr = 0.1
INI
expect 0 '90 training, 30 validation and 30 test samples of 4, 3 classes' \
  "float32 x and int64 labels, with validation and test files, train" \
  -- train "$T/blobs.ini" --out "$T/ref"
check "... and learn the blobs (test_acc above 0.8)" \
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "test_acc") k = i }
    NR > 1 && k && $k != "" { a = $k } END { exit !(a > 0.8) }' "$T/ref/metrics.csv"
for v in x_f8 x_be x_be8 x_v2 x_v3; do
  train "$T/blobs.ini" --out "$T/r-$v" --set "npy.x=$D/$v.npy"
  check "x as $v.npy: the same run" equal "$T/ref" "$T/r-$v"
done
for v in y_i4 y_u1 y_be y_be4 y_col; do
  train "$T/blobs.ini" --out "$T/r-$v" --set "npy.y=$D/$v.npy"
  check "y as $v.npy: the same run" equal "$T/ref" "$T/r-$v"
done
NOPAIRS="--set npy.y= --set npy.val_x= --set npy.val_y= --set npy.test_x= --set npy.test_y="
# shellcheck disable=SC2086
train "$T/blobs.ini" --out "$T/r-npz" --set "npy.x=$D/data.npz" $NOPAIRS
check "an .npz of x_train, y_train, x_val, y_val, x_test, y_test (np.savez): the same run" \
  equal "$T/ref" "$T/r-npz"
# shellcheck disable=SC2086
expect 0 'deflated arrays \(np.savez_compressed\): [0-9]+ bytes inflated into memory' \
  "np.savez_compressed: inflated, and said so" \
  -- train "$T/blobs.ini" --out "$T/r-npzc" --set "npy.x=$D/data_c.npz" $NOPAIRS
check "... the same run" equal "$T/ref" "$T/r-npzc"
# shellcheck disable=SC2086
expect 0 'trained 18 steps' "an .npz of x and y" \
  -- train "$T/blobs.ini" --out "$T/r-xy" --set "npy.x=$D/xy.npz" $NOPAIRS
expect 0 'trained 18 steps' "int64 x, converted to f32" \
  -- train "$T/blobs.ini" --out "$T/r-i8" --set "npy.x=$D/x_i8.npy"

# ---- 2. shuffling, resume, splits ------------------------------------------

train "$T/blobs.ini" --out "$T/again"
check "the same seed: the same run" equal "$T/ref" "$T/again"
train "$T/blobs.ini" --out "$T/seed2" --set loop.seed=2
check "another seed: another order, another run" sh -c "! cmp -s '$T/ref/metrics.csv' '$T/seed2/metrics.csv'"
train "$T/blobs.ini" --out "$T/noshuf" --set npy.shuffle=false
check "shuffle = false: another run" sh -c "! cmp -s '$T/ref/metrics.csv' '$T/noshuf/metrics.csv'"
train "$T/blobs.ini" --out "$T/part" --set loop.max_steps=8
check "stopped after 8 steps, in the middle of epoch 1" \
  grep -q 'trained 8 steps' "$T/train.out"
train "$T/blobs.ini" --resume "$T/part/checkpoints/last.ckpt" --set loop.max_steps=-1
# (its metrics.csv has a row more: the test that ended the first part)
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "test_loss") k = i }
  NR > 1 && k && $k != "" && !cut { cut = 1; next } { print }' \
  "$T/part/metrics.csv" >"$T/part-rows.csv"
check "resumed in the middle of an epoch: the uninterrupted run's weights, bit for bit" \
  weights "$T/ref" "$T/part"
check "... and the same rows for every step" \
  cmp -s "$T/ref/metrics.csv" "$T/part-rows.csv"

expect 0 '81 training, 9 validation and 0 test samples' "val_split holds out of the training file" \
  -- train "$T/blobs.ini" --out "$T/r-vs" --set npy.val_x= --set npy.val_y= \
  --set npy.test_x= --set npy.test_y= --set npy.val_split=0.1 --set npy.limit=90
expect 0 '63 training, 18 validation and 9 test samples' "val_split, test_split and limit" \
  -- train "$T/blobs.ini" --out "$T/r-vts" --set npy.val_x= --set npy.val_y= \
  --set npy.test_x= --set npy.test_y= --set npy.val_split=0.2 \
  --set npy.test_split=0.1 --set npy.limit=90
expect 0 'trained 15 steps' "drop_last: 5 full batches of 16 of 90, 3 epochs" \
  -- train "$T/blobs.ini" --out "$T/r-drop" --set npy.drop_last=true
expect 0 'trained 6 steps' "limit = 20: 2 batches an epoch" \
  -- train "$T/blobs.ini" --out "$T/r-lim" --set npy.limit=20

# The same numbers as csv reads them: the same bits, whatever normalize.
config iris_csv <<INI
[loop]
max_epochs = 3
seed = 5
[plugins]
step = mlp
optimizer = sgd
data = csv
[csv]
path = $LK_SRCDIR/tests/data/sklearn-iris.csv
header = false
skip_rows = 1
val_split = 0.2
test_split = 0.1
batch_size = 16
[mlp]
layers = 4,8,3
[sgd]
lr = 0.1
INI
sed -e 's/^data = csv/data = npy/' -e 's/^\[csv\]/[npy]/' -e '/^path = /d' \
  -e '/^header = /d' -e '/^skip_rows = /d' \
  -e "s|^\\[npy\\]|[npy]\\nx = $D/iris_x.npy\\ny = $D/iris_y.npy|" \
  "$T/iris_csv.ini" >"$T/iris_npy.ini"
for norm in none scale standard; do
  train "$T/iris_csv.ini" --out "$T/ic-$norm" --set csv.normalize=$norm &&
    train "$T/iris_npy.ini" --out "$T/in-$norm" --set npy.normalize=$norm
  check "iris as float64 .npy and as CSV, normalize = $norm: the same run" \
    equal "$T/ic-$norm" "$T/in-$norm"
done

# ---- 3. the samples' shape, declared to the models -------------------------

config cnn <<INI
[loop]
max_epochs = 2
seed = 3
[plugins]
step = sequential
optimizer = adam
data = npy
[npy]
x = $D/img_u1.npy
y = $D/img_y.npy
x_shape = 1,6,6
batch_size = 8
val_split = 0.25
[sequential]
layers = conv2d(4, 3), relu, maxpool2d(2), flatten, linear(2)
[adam]
lr = 0.01
INI
expect 0 'samples of 1x6x6, 2 classes' "uint8 images (N, 6, 6) with x_shape = 1,6,6 train a conv net" \
  -- train "$T/cnn.ini" --out "$T/cnn-u1"
train "$T/cnn.ini" --out "$T/cnn-f4" --set "npy.x=$D/img_f4.npy" --set npy.x_shape=
check "float32 images (N, 1, 6, 6), numpy's x / 255: the same run as uint8 scaled (normalize = auto)" \
  equal "$T/cnn-u1" "$T/cnn-f4"
train "$T/cnn.ini" --out "$T/cnn-none" --set npy.normalize=none
check "normalize = none leaves the bytes unscaled: another run" \
  sh -c "! cmp -s '$T/cnn-u1/metrics.csv' '$T/cnn-none/metrics.csv'"
expect 2 'layer 0 \(conv2d\): input \[6, 6\]; expected an image \[C, H, W\]' \
  "without x_shape the stored shape (6, 6) reaches the model, which says what it needs" \
  -- train "$T/cnn.ini" --out "$T/cnn-noshape" --set npy.x_shape=
expect 2 'layers\[0\] = 784, but the data.s samples have 36 \(1x6x6\) features' \
  "mlp is told the declared shape" \
  -- train "$T/cnn.ini" --out "$T/cnn-mlp" --set plugins.step=mlp --set mlp.layers=784,2
expect 2 'x_shape = 2,6,6 holds 72 values, but the samples of .*img_u1.npy hold 36' \
  "an x_shape of another size is refused" \
  -- train "$T/cnn.ini" --out "$T/cnn-bad" --set npy.x_shape=2,6,6

config reg <<INI
[loop]
max_epochs = 2
[plugins]
step = linear
optimizer = sgd
data = npy
[npy]
x = $D/reg_x.npy
y = $D/reg_y.npy
batch_size = 8
[linear]
inputs = 3
outputs = 1
[sgd]
lr = 0.05
INI
expect 0 'trained 10 steps' "float32 targets (N,): regression" -- train "$T/reg.ini" --out "$T/reg1"
expect 0 'trained 10 steps' "float64 targets (N, 2): two outputs" \
  -- train "$T/reg.ini" --out "$T/reg2" --set "npy.y=$D/reg_y2.npy" --set linear.outputs=2
expect 2 'outputs = 1, but the data.s samples have another number of targets' \
  "targets (N, 2) for one output: refused at create" \
  -- train "$T/reg.ini" --out "$T/reg3" --set "npy.y=$D/reg_y2.npy"

# ---- 4. refusals: the file and the field, exit status 2 --------------------

refused() { # FILE OPTION PATTERN DESC
  expect 2 "$3" "$4" -- train "$T/blobs.ini" --out "$T/bad" --set "npy.$2=$D/$1"
}
refused bad_c8.npy x "bad_c8.npy: header field 'descr': '<c8' is not supported \\(float32, float64, uint8, int32, int64" \
  "complex64 is refused, naming the file and descr"
refused bad_struct.npy x "bad_struct.npy: header field 'descr': a structured dtype" "a structured array"
refused x_fortran.npy x "x_fortran.npy: header field 'fortran_order': True .* save np.ascontiguousarray\\(a\\) instead" \
  "Fortran order, with how to fix it"
refused bad_truncated.npy x "bad_truncated.npy: is truncated: header field 'shape' \\(90, 4\\) of '<f4' needs 1440 bytes of data after the 128-byte header, there are 1432" \
  "a truncated file, with both sizes"
refused bad_trailing.npy x "bad_trailing.npy: has 4 bytes after the data that header field 'shape' \\(90, 4\\)" \
  "bytes after the data"
refused bad_magic.npy x "bad_magic.npy: header field 'magic': neither a .npy file" "a file that is not numpy's"
refused bad_magic.npy y "bad_magic.npy: header field 'magic': not a .npy file" "... as y"
refused bad_version.npy x "bad_version.npy: header field 'version': 9.0 is not supported" "an unknown version"
refused bad_hlen.npy x "bad_hlen.npy: header field 'header_len': 60000 bytes, but the file has 1558" "a header longer than the file"
refused bad_noshape.npy x "bad_noshape.npy: header field 'shape' is missing" "a missing field"
refused bad_shape.npy x "bad_shape.npy: header field 'shape': expected a dimension" "a shape that is not a tuple of numbers"
refused bad_key.npy x "bad_key.npy: header field 'extra' is not one of descr, fortran_order, shape" "an unknown field"
refused bad_fortran_value.npy x "bad_fortran_value.npy: header field 'fortran_order': expected True or False" "fortran_order that is no bool"
refused bad_scalar.npy x "bad_scalar.npy: header field 'shape': \\(\\) is one value" "a 0-d array"
refused bad_empty.npy x "bad_empty.npy: header field 'shape': \\(0, 4\\) holds no samples" "an empty array"
refused bad_3d_labels.npy y "bad_3d_labels.npy: header field 'shape': \\(90, 2\\): class labels \\('<i8'\\) are one per sample" \
  "labels of two columns"
refused y_short.npy y "x.npy has 90 samples \\(header field 'shape' \\(90, 4\\)\\) but .*y_short.npy has 80" \
  "x and y of different lengths"
refused x_3feat.npy x "val_x.npy: header field 'shape': samples of \\(4,\\), the training x's are \\(3,\\)" \
  "validation samples of another shape"
refused y_float.npy y "val_y.npy: header field 'descr': '<i8' makes class labels, the training y's '<f4' targets" \
  "labels in one split, targets in another"
refused y_neg.npy y 'y_neg.npy: y\[7\] = -1: class labels are whole numbers from 0' \
  "a negative label, by its index"
expect 2 'y.npy: y\[2\] = 2, but num_classes = 2: labels are in \[0, 2\)' \
  "a label past num_classes" -- train "$T/blobs.ini" --out "$T/bad" --set npy.num_classes=2
expect 2 'cannot open val_x file .*/nowhere.npy' "a missing file names the option and the path" \
  -- train "$T/blobs.ini" --out "$T/bad" --set npy.val_x=nowhere.npy
expect 2 'x file /dev/null is not a regular file' "a device is refused" \
  -- train "$T/blobs.ini" --out "$T/bad" --set npy.x=/dev/null
expect 2 'test_x = .*test_x.npy without test_y: name both files or neither' "half a pair" \
  -- train "$T/blobs.ini" --out "$T/bad" --set npy.test_y=
expect 2 'val_split = 0.1 and a validation pair \(val_x and val_y\)' "val_split with val_x" \
  -- train "$T/blobs.ini" --out "$T/bad" --set npy.val_split=0.1
expect 2 'test_split = 0.1 and a test pair \(x_test and y_test in .*data.npz\)' "test_split with an .npz's x_test" \
  -- train "$T/blobs.ini" --out "$T/bad" --set "npy.x=$D/data.npz" $NOPAIRS --set npy.test_split=0.1
expect 2 'y = .*y.npy with an .npz x: the archive.s arrays are taken by name' "y with an .npz x" \
  -- train "$T/blobs.ini" --out "$T/bad" --set "npy.x=$D/data.npz"
expect 2 'y = .*data.npz is an .npz archive: only x may name one' "an .npz as y" \
  -- train "$T/blobs.ini" --out "$T/bad" --set "npy.y=$D/data.npz"
expect 2 "y is empty: name the .npy file" "y is needed with a .npy x" \
  -- train "$T/blobs.ini" --out "$T/bad" --set npy.y=
expect 2 'other.npz: no training arrays: an .npz x needs x_train and y_train \(or x and y\); it holds a and b' \
  "an .npz without the arrays lists what it holds" \
  -- train "$T/blobs.ini" --out "$T/bad" --set "npy.x=$D/other.npz" $NOPAIRS
expect 2 'only_x.npz holds x_train but not y_train \(it holds x_train and notes\)' \
  "an .npz with half a pair" \
  -- train "$T/blobs.ini" --out "$T/bad" --set "npy.x=$D/only_x.npz" $NOPAIRS
head -c 3000 "$D/data.npz" >"$T/cut.npz"
expect 2 'cut.npz: not a zip archive \(.npz\): no end of central directory record' "a cut .npz" \
  -- train "$T/blobs.ini" --out "$T/bad" --set "npy.x=$T/cut.npz" $NOPAIRS
expect 2 'npy.normalize: expected one of auto\|none\|scale\|standard, got "minmax"' \
  "normalize is an enum" -- train "$T/blobs.ini" --out "$T/bad" --set npy.normalize=minmax
check "no run directory was left by a refused run" test ! -e "$T/bad"
expect 1 'batch [0-9]+ of data plugin npy: .*x_nan.npy: x\[7, 2\] = nan is not finite' \
  "a NaN in x fails the run (status 1) at the batch that reads it, by its index" \
  -- train "$T/blobs.ini" --out "$T/nan" --set "npy.x=$D/x_nan.npy"
expect 2 'x_nan.npy: x\[7, 2\] = nan is not finite' \
  "... at create when normalize takes statistics (status 2)" \
  -- train "$T/blobs.ini" --out "$T/nan2" --set "npy.x=$D/x_nan.npy" --set npy.normalize=standard
expect 1 'x_big.npy: x\[11, 3\] = 1e\+300 is beyond float32.s range' \
  "a float64 beyond float32's range" \
  -- train "$T/blobs.ini" --out "$T/big" --set "npy.x=$D/x_big.npy"

expect 0 'x_shape' "inspect npy lists its options" -- inspect npy

# ---- 5. a data set larger than memory ---------------------------------------

# A sparse .npy of the machine's memory and 1 GiB more: 65536-byte samples
# (16384 float32 zeros each) and uint8 labels, made with truncate in no
# time and no space. A few shuffled batches train; a plugin that read the
# file in would run out of memory, and the peak resident set stays small.
mem_kb=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo 2>/dev/null)
# npy_header FILE DICT: a version 1.0 header of 128 bytes, padded as numpy
# pads (spaces and a newline).
npy_header() {
  printf '\223NUMPY\001\000\166\000' >"$1"
  printf '%-117s\n' "$2" >>"$1"
}
if [ -z "$mem_kb" ]; then
  ok "# SKIP /proc/meminfo has no MemTotal"
else
  rows=$(((mem_kb / 1024 + 1024) * 16)) # 64 KiB rows: MemTotal + 1 GiB
  npy_header "$T/huge_x.npy" "{'descr': '<f4', 'fortran_order': False, 'shape': ($rows, 16384), }"
  npy_header "$T/huge_y.npy" "{'descr': '|u1', 'fortran_order': False, 'shape': ($rows,), }"
  if truncate -s $((128 + rows * 65536)) "$T/huge_x.npy" 2>/dev/null &&
    truncate -s $((128 + rows)) "$T/huge_y.npy"; then
    config huge <<INI
[loop]
max_steps = 4
[plugins]
step = mlp
optimizer = sgd
data = npy
[npy]
x = $T/huge_x.npy
y = $T/huge_y.npy
batch_size = 4
[mlp]
layers = 16384,2
[sgd]
lr = 0.001
INI
    if [ -x /usr/bin/time ]; then
      /usr/bin/time -f 'maxrss_kb %M' -o "$T/rss" "$LOOPKIT" train "$T/huge.ini" \
        --out "$T/huge" >"$T/huge.out" 2>&1
    else
      "$LOOPKIT" train "$T/huge.ini" --out "$T/huge" >"$T/huge.out" 2>&1
    fi
    st=$?
    check "a .npy of $((rows / 16)) MiB (memory: $((mem_kb / 1024)) MiB) trains 4 shuffled batches, mapped" \
      sh -c "[ $st -eq 0 ] && grep -q 'trained 4 steps' '$T/huge.out'" ||
      sed 's/^/#   /' "$T/huge.out" | tail -5
    if [ -s "$T/rss" ]; then
      rss=$(awk '/^maxrss_kb/ { print $2 }' "$T/rss")
      echo "# peak resident set: $rss KiB"
      # 1 GiB leaves room for valgrind and the sanitizers' own memory.
      check "... its peak resident set stays under 1 GiB" [ "${rss:-9999999}" -lt 1048576 ]
    else
      ok "# SKIP /usr/bin/time is not installed (Debian: time)"
    fi
  else
    ok "# SKIP the file system here takes no sparse file of $((rows / 16)) MiB"
  fi
  rm -f "$T/huge_x.npy" "$T/huge_y.npy"
fi
finish

#!/bin/sh
# loopkit predict --input FILE: new samples without labels (a .npy in any
# encoding the npy data plugin reads, or a CSV without a label column)
# through the model alone (lk_model) give the rows loopkit predict gives
# on the same samples from the data plugin; a file whose samples are not
# the model's shape is refused naming both shapes.
. "$LK_SRCDIR/tests/cli/lib.sh"
cd "$T" || exit 1
D=$LK_SRCDIR/tests/data/npy

lk() { "$LOOPKIT" "$@" 2>"$T/err"; }
train() { "$LOOPKIT" train "$@" --quiet >"$T/train.out" 2>&1; }

# ---- 1. a .npy: the npy plugin's blobs, 4 features, 3 classes -----------
config blobs <<INI
[loop]
max_epochs = 3
seed = 1
[plugins]
step = sequential
optimizer = sgd
data = npy
callbacks = checkpoint
[npy]
x = $D/x.npy
y = $D/y.npy
test_x = $D/test_x.npy
test_y = $D/test_y.npy
batch_size = 16
[sequential]
layers = linear(8), batchnorm1d, relu, dropout(0.5), linear(3)
[sgd]
lr = 0.1
INI
train "$T/blobs.ini" --out "$T/blobs"
check "a sequential net with batch norm and dropout trains on the npy blobs" \
  test -f "$T/blobs/checkpoints/last.ckpt"
CK=$T/blobs/checkpoints/last.ckpt

lk predict "$T/blobs.ini" --ckpt "$CK" >"$T/ref.csv"
lk predict "$T/blobs.ini" --ckpt "$CK" --input "$D/test_x.npy" >"$T/in.csv"
check "--input test_x.npy: exit 0" test $? -eq 0
check "--input test_x.npy: 30 rows and the header" test "$(wc -l <"$T/in.csv")" -eq 31
check "--input test_x.npy: predict's rows on the test split, byte for byte" \
  cmp -s "$T/ref.csv" "$T/in.csv"
lk predict "$T/blobs.ini" --ckpt "$CK" --input "$D/test_x.npy" -o "$T/in-o.csv" >"$T/in-o.out"
check "--input with -o FILE: FILE holds the rows, nothing on the standard output" \
  sh -c "cmp -s '$T/ref.csv' '$T/in-o.csv' && test ! -s '$T/in-o.out'"

# The training x in every encoding (f4, f8, big-endian, header 3.0)
# against predict on it as the test split.
lk predict "$T/blobs.ini" --ckpt "$CK" --set "npy.test_x=$D/x.npy" \
  --set "npy.test_y=$D/y.npy" >"$T/ref-x.csv"
for f in x x_f8 x_be x_be8 x_v3; do
  lk predict "$T/blobs.ini" --ckpt "$CK" --input "$D/$f.npy" >"$T/in-$f.csv"
  check "--input $f.npy: predict's 90 rows on the same samples" \
    sh -c "cmp -s '$T/ref-x.csv' '$T/in-$f.csv' && test \$(wc -l <'$T/in-$f.csv') -eq 91"
done

# Integers that look like labels are data like any other: int64 samples
# are features, as the npy plugin reads them.
lk predict "$T/blobs.ini" --ckpt "$CK" --set "npy.test_x=$D/x_i8.npy" \
  --set "npy.test_y=$D/y.npy" >"$T/ref-i8.csv"
lk predict "$T/blobs.ini" --ckpt "$CK" --input "$D/x_i8.npy" >"$T/in-i8.csv"
check "--input x_i8.npy (small whole numbers): taken as features, predict's rows" \
  sh -c "cmp -s '$T/ref-i8.csv' '$T/in-i8.csv' && test \$(wc -l <'$T/in-i8.csv') -eq 91"

# A label column beside the features is not taken off: 5 values a
# sample is not the model's 4.
/usr/bin/python3 -c "
import numpy as np
x = np.load('$D/test_x.npy'); y = np.load('$D/test_y.npy')
np.save('$T/xy.npy', np.hstack([x, y[:, None].astype(np.float32)]))
"
expect 2 "xy.npy holds an array of shape \(30, 5\): samples of shape \(5,\), but the model takes samples of f32 \[4\]" \
  "--input with a label column (30, 5): refused naming both shapes, exit 2" -- \
  predict "$T/blobs.ini" --ckpt "$CK" --input "$T/xy.npy"
expect 2 "x_3feat.npy holds an array of shape \(90, 3\).*f32 \[4\]" \
  "--input of 3 features for a model of 4: refused naming both shapes" -- \
  predict "$T/blobs.ini" --ckpt "$CK" --input "$D/x_3feat.npy"
expect 2 "bad_magic.npy: .*magic" \
  "--input of a damaged .npy: the reader's message, exit 2" -- \
  predict "$T/blobs.ini" --ckpt "$CK" --input "$D/bad_magic.npy"
expect 2 "x_nan.npy: element [0-9]+ \(sample [0-9]+\) is nan" \
  "--input holding a NaN: refused naming the element" -- \
  predict "$T/blobs.ini" --ckpt "$CK" --input "$D/x_nan.npy"
expect 2 "0\.weight is f32\[8,4\] there but f32\[5,4\]" \
  "--input with --set: the config as changed (another net) is the model opened" -- \
  predict "$T/blobs.ini" --ckpt "$CK" --input "$D/test_x.npy" \
  --set "sequential.layers=linear(5), batchnorm1d, relu, dropout(0.5), linear(3)"
expect 2 "predict: --input needs a value" "--input without a value: exit 2" -- \
  predict "$T/blobs.ini" --ckpt "$CK" --input
expect 2 "-o .*in-o.csv is the --input file itself" \
  "-o the --input file: refused" -- \
  predict "$T/blobs.ini" --ckpt "$CK" --input "$T/in-o.csv" -o "$T/in-o.csv"

# ---- 2. an image net: samples [1, 6, 6], given as (N, 1, 6, 6) ----------
config img <<INI
[loop]
max_epochs = 2
seed = 3
[plugins]
step = sequential
optimizer = sgd
data = npy
callbacks = checkpoint
[npy]
x = $D/img_f4.npy
y = $D/img_y.npy
test_x = $D/img_f4.npy
test_y = $D/img_y.npy
batch_size = 8
[sequential]
layers = conv2d(2, 3, padding=1), batchnorm2d, relu, maxpool2d(2), flatten, linear(2)
[sgd]
lr = 0.05
INI
train "$T/img.ini" --out "$T/img"
lk predict "$T/img.ini" --ckpt "$T/img/checkpoints/last.ckpt" >"$T/img-ref.csv"
lk predict "$T/img.ini" --ckpt "$T/img/checkpoints/last.ckpt" --input "$D/img_f4.npy" >"$T/img-in.csv"
check "--input of images (N, 1, 6, 6) to a conv net: predict's rows" \
  sh -c "cmp -s '$T/img-ref.csv' '$T/img-in.csv' && test \$(wc -l <'$T/img-in.csv') -gt 2"
# (48, 6, 6) is the same sample shape once the 1 is left out; its bytes
# are taken as they are (no x / 255: that is the data plugin's).
lk predict "$T/img.ini" --ckpt "$T/img/checkpoints/last.ckpt" --input "$D/img_u1.npy" >"$T/img-u1.csv"
check "--input (48, 6, 6) uint8 to a net of [1, 6, 6]: 48 rows" \
  sh -c "test \$(wc -l <'$T/img-u1.csv') -eq 49"
check "... with a warning that the bytes are not divided by 255" \
  grep -q "warning: --input .*img_u1.npy holds uint8 values, taken as they are" "$T/err"

# ---- 3. a CSV without a label column -------------------------------------
awk 'BEGIN { print "a,b,label"
  for (i = 0; i < 120; i++) { c = i % 3; printf "%.4f,%.4f,%d\n", c + (i * 37 % 100) / 66, (c == 1) + (i * 53 % 100) / 66, c } }' >"$T/train.csv"
awk 'BEGIN { print "a,b,label"
  for (i = 0; i < 25; i++) { c = i % 3; printf "%.4f,%.4f,%d\n", c + (i * 71 % 100) / 66, (c == 1) + (i * 29 % 100) / 66, c } }' >"$T/test.csv"
config cls <<INI
[loop]
max_epochs = 5
[plugins]
step = sequential
optimizer = sgd
data = csv
callbacks = checkpoint
[csv]
path = $T/train.csv
test = $T/test.csv
batch_size = 10
[sequential]
layers = linear(8), relu, linear(3)
[sgd]
lr = 0.1
INI
train "$T/cls.ini" --out "$T/cls"
CC=$T/cls/checkpoints/last.ckpt
lk predict "$T/cls.ini" --ckpt "$CC" >"$T/cls-ref.csv"
cut -d, -f1,2 "$T/test.csv" >"$T/unl.csv"
lk predict "$T/cls.ini" --ckpt "$CC" --input "$T/unl.csv" >"$T/cls-in.csv"
check "--input CSV with a header, no label column: predict's 25 rows" \
  sh -c "cmp -s '$T/cls-ref.csv' '$T/cls-in.csv' && test \$(wc -l <'$T/cls-in.csv') -eq 26"
tail -n +2 "$T/unl.csv" >"$T/unl-nohead.csv"
lk predict "$T/cls.ini" --ckpt "$CC" --input "$T/unl-nohead.csv" >"$T/cls-in2.csv"
check "--input CSV without a header: the same rows" cmp -s "$T/cls-ref.csv" "$T/cls-in2.csv"
expect 2 "test.csv:2: 3 values, but the model takes samples of f32 \[2\]" \
  "--input CSV with its label column: refused naming the line and the shape" -- \
  predict "$T/cls.ini" --ckpt "$CC" --input "$T/test.csv"
printf 'a,b\n1,2\n3,x\n' >"$T/bad.csv"
expect 2 "bad.csv:3: field 2 is not a number" \
  "--input CSV with a word among the numbers: refused naming line and field" -- \
  predict "$T/cls.ini" --ckpt "$CC" --input "$T/bad.csv"
printf 'a,b\n' >"$T/empty.csv"
expect 2 "empty.csv holds no sample" "--input CSV of a header alone: refused" -- \
  predict "$T/cls.ini" --ckpt "$CC" --input "$T/empty.csv"
expect 2 "--input .*nothere.csv: No such file" "--input of a missing file: exit 2" -- \
  predict "$T/cls.ini" --ckpt "$CC" --input "$T/nothere.csv"

# ---- 4. a regression: index,y0 ------------------------------------------
awk 'BEGIN { print "a,b,t"
  for (i = 0; i < 60; i++) { a = (i * 37 % 100) / 50; b = (i * 53 % 100) / 50; printf "%.4f,%.4f,%.4f\n", a, b, 2 * a - b } }' >"$T/rtrain.csv"
head -21 "$T/rtrain.csv" >"$T/rtest.csv"
config reg <<INI
[loop]
max_epochs = 3
[plugins]
step = sequential
optimizer = sgd
data = csv
callbacks = checkpoint
[csv]
path = $T/rtrain.csv
test = $T/rtest.csv
labels = float
batch_size = 10
[sequential]
layers = linear(4), relu, linear(1)
loss = mse
[sgd]
lr = 0.05
INI
train "$T/reg.ini" --out "$T/reg"
lk predict "$T/reg.ini" --ckpt "$T/reg/checkpoints/last.ckpt" >"$T/reg-ref.csv"
cut -d, -f1,2 "$T/rtest.csv" >"$T/rin.csv"
lk predict "$T/reg.ini" --ckpt "$T/reg/checkpoints/last.ckpt" --input "$T/rin.csv" >"$T/reg-in.csv"
check "--input to a regression: header index,y0 and predict's 20 rows" \
  sh -c "head -1 '$T/reg-in.csv' | grep -qx 'index,y0' && cmp -s '$T/reg-ref.csv' '$T/reg-in.csv'"

# ---- 5. tokens: a language model over bytes (text's block_size = auto) --
awk 'BEGIN { for (i = 0; i < 400; i++) printf "the quick brown fox %d jumps over the lazy dog\n", i }' >"$T/corpus.txt"
config lm <<INI
[loop]
max_steps = 3
[plugins]
step = sequential
optimizer = adamw
data = text
callbacks = checkpoint
[text]
path = $T/corpus.txt
batch_size = 2
val_split = 0.2
[sequential]
layers = embedding(128, 8), relu, linear(128)
block_size = 12
INI
train "$T/lm.ini" --out "$T/lm"
printf '116,104,101,32,113,117,105,99,107,32,98,114\n32,111,118,101,114,32,116,104,101,32,108,97\n' >"$T/tokens.csv"
lk predict "$T/lm.ini" --ckpt "$T/lm/checkpoints/last.ckpt" --input "$T/tokens.csv" >"$T/lm-csv.csv"
check "--input tokens (CSV) with text.block_size = auto: the model's 12, two rows of 128 probabilities" \
  sh -c "test \$(wc -l <'$T/lm-csv.csv') -eq 3 && head -1 '$T/lm-csv.csv' | grep -q ',p127\$'"
/usr/bin/python3 -c "
import numpy as np
np.save('$T/tokens.npy', np.loadtxt('$T/tokens.csv', delimiter=',', dtype=np.int32))
"
lk predict "$T/lm.ini" --ckpt "$T/lm/checkpoints/last.ckpt" --input "$T/tokens.npy" >"$T/lm-npy.csv"
check "--input the same tokens as an int32 .npy: the same rows" cmp -s "$T/lm-csv.csv" "$T/lm-npy.csv"
printf '116,104,101,32,113,117,105,99,107,32,98,114.5\n' >"$T/half.csv"
expect 2 "half.csv:1: value 12 is 114.5: not a token" \
  "--input a token that is not a whole number: refused naming line and value" -- \
  predict "$T/lm.ini" --ckpt "$T/lm/checkpoints/last.ckpt" --input "$T/half.csv"

finish

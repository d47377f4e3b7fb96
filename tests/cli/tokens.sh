#!/bin/sh
# Token inputs (issue 27 item 3): embedding(num_embeddings, embedding_dim,
# padding_idx) first in a sequential net, fed by the text plugin (bytes,
# i32 [T]) and by npy (int64, int32 or uint8 x with tokens = N, each
# checked in [0, N) naming the file and index); padding_idx as torch's: its row starts at zero and is never
# trained (its gradient zero), negative counted from num_embeddings, out
# of range refused; a float sample reaching an embedding is a config
# error naming the layer and the data. One SGD step of an embedding with
# padding_idx on npy tokens equals torch's (tests/data/embedding_padding,
# from tests/torch/embedding_padding_reference.py), the padding row, loaded
# nonzero from init, used in the forward and left as it was.
. "$LK_SRCDIR/tests/cli/lib.sh"
cd "$T" || exit 1

awk 'BEGIN { for (i = 0; i < 400; i++) printf "the cat sat on the mat %d. ", i % 7 }' >corpus.txt
config lm <<INI
[loop]
max_steps = 40
seed = 3
[plugins]
step = sequential
optimizer = adamw
data = text
[text]
path = corpus.txt
batch_size = 8
block_size = 8
[adamw]
lr = 0.01
[sequential]
layers = embedding(256, 4, padding_idx=32), linear(256)
INI
# row R of 0.weight ([256, 4]) in CKPT, on one line
row() { "$LOOPKIT" dump "$2" | awk -v r="$1" '
  $1 ~ /^0\.weight\[/ { i = substr($1, 10) + 0; if (int(i / 4) == r) printf "%s ", $2 }'; }

expect 0 'trained 40 steps' "embedding(256, 4, padding_idx=32) over text's bytes (spaces among them): trains" \
  -- train "$T/lm.ini" --out "$T/pad" --quiet
check "... the padding row (byte 32, a space) is zero after 40 steps of adamw: zero at init, no gradient" \
  test "$(row 32 "$T/pad/checkpoints/last.ckpt")" = "0 0 0 0 "
check "... while the row of byte 't' is trained (not zero)" \
  test "$(row 116 "$T/pad/checkpoints/last.ckpt")" != "0 0 0 0 "
"$LOOPKIT" train "$T/lm.ini" --out "$T/nopad" --quiet \
  --set "sequential.layers=embedding(256, 4), linear(256)" >/dev/null 2>&1
check "without padding_idx, the same run's row 32 is trained (not zero)" \
  test "$(row 32 "$T/nopad/checkpoints/last.ckpt")" != "0 0 0 0 "
"$LOOPKIT" train "$T/lm.ini" --out "$T/neg" --quiet \
  --set "sequential.layers=embedding(256, 4, padding_idx=-224), linear(256)" >/dev/null 2>&1
check "padding_idx=-224 is 256 - 224 = 32: the same checkpoint's values" \
  sh -c "'$LOOPKIT' dump '$T/pad/checkpoints/last.ckpt' >'$T/a' && '$LOOPKIT' dump '$T/neg/checkpoints/last.ckpt' >'$T/b' && cmp -s '$T/a' '$T/b'"
expect 2 'layer 0 \(embedding\).*padding_idx = 256: out of range for num_embeddings = 256 \(expected -256 to 255\)' \
  "padding_idx = num_embeddings: refused (exit 2), naming the layer" \
  -- train "$T/lm.ini" --out "$T/bad" --quiet --set "sequential.layers=embedding(256, 4, 256), linear(256)"

# ---- a float sample reaching an embedding ----
python3 "$LK_SRCDIR/tests/onnx/npy.py" "$T/x.npy" f4 24,6 normal 1
python3 "$LK_SRCDIR/tests/onnx/npy.py" "$T/y.npy" i8 24 int:3 2
config f <<INI
[loop]
max_steps = 2
[plugins]
step = sequential
optimizer = adam
data = npy
[npy]
x = x.npy
y = y.npy
batch_size = 8
[sequential]
layers = embedding(10, 4), flatten, linear(3)
INI
expect 2 'layer 0 \(embedding\): takes tokens, i32 \[T\], as the first layer; the data.s samples are f32 \[6\], not tokens' \
  "float samples into an embedding: a config error (exit 2) naming the layer and the data's samples" \
  -- train "$T/f.ini" --out "$T/f" --quiet

# ---- npy: integer x as tokens (tokens = N) ----
NPY="$LK_SRCDIR/tests/onnx/npy.py"
python3 "$NPY" "$T/t8.npy" i8 24,6 int:10 1
python3 "$NPY" "$T/t4.npy" i4 24,6 int:10 1
python3 "$NPY" "$T/t11.npy" i8 24,6 int:11 1
expect 0 'trained 2 steps' "npy, int64 x and tokens = 10: embedding(10, 4) trains on them" \
  -- train "$T/f.ini" --out "$T/t8" --quiet --set npy.x=t8.npy --set npy.tokens=10
expect 0 'trained 2 steps' "... int32 x of the same values" \
  -- train "$T/f.ini" --out "$T/t4" --quiet --set npy.x=t4.npy --set npy.tokens=10
check "... the same run: the same checkpoint values" \
  sh -c "'$LOOPKIT' dump '$T/t8/checkpoints/last.ckpt' >'$T/a' && '$LOOPKIT' dump '$T/t4/checkpoints/last.ckpt' >'$T/b' && cmp -s '$T/a' '$T/b'"
expect 2 "t11.npy: x\\[[0-9]+, [0-9]\\] = 10, but tokens = 10: tokens are in \\[0, 10\\)" \
  "a token out of [0, tokens): refused at create (exit 2), naming the file and the index" \
  -- train "$T/f.ini" --out "$T/t11" --quiet --set npy.x=t11.npy --set npy.tokens=10
expect 2 "tokens = 10, but $T/x.npy holds float32: tokens are integers" \
  "tokens = 10 with float32 x: refused (exit 2), naming the file" \
  -- train "$T/f.ini" --out "$T/tf" --quiet --set npy.tokens=10
expect 2 "the data.s samples are tokens, i32 \\[6\\]: the first layer must be embedding" \
  "tokens into a net without an embedding first: refused (exit 2)" \
  -- train "$T/f.ini" --out "$T/tl" --quiet --set npy.x=t8.npy --set npy.tokens=10 \
  --set "sequential.layers=flatten, linear(3)"
expect 0 'trained 2 steps' "without tokens, the int64 x are features, f32, as before (a linear first)" \
  -- train "$T/f.ini" --out "$T/tl" --quiet --set npy.x=t8.npy --set "sequential.layers=flatten, linear(3)"

# ---- torch's step, padding_idx included (the padding row loaded nonzero) ----
R="$LK_SRCDIR/tests/data/embedding_padding"
config ref <<INI
[loop]
max_steps = 1
[plugins]
step = sequential
optimizer = sgd
data = npy
[npy]
x = $R/x.npy
y = $R/y.npy
tokens = 10
batch_size = 8
shuffle = false
[sgd]
lr = 0.5
[sequential]
layers = $(sed -n 's/^layers //p' "$R/reference.txt")
init = $R/init.safetensors
INI
expect 0 "last loss $(sed -n 's/^loss\[0\] //p' "$R/reference.txt")" \
  "npy tokens into embedding(10, 4, padding_idx=2), flatten, linear(3), one SGD step: torch's loss" \
  -- train "$T/ref.ini" --out "$T/ref" --quiet
"$LOOPKIT" dump "$T/ref/checkpoints/last.ckpt" >"$T/got.txt"
check "... and torch's parameters after it, to 1e-6 (the padding row unchanged)" \
  awk 'NR == FNR { if ($1 != "layers" && $1 !~ /^loss/) { w[$1] = $2; n++ } next }
    ($1 in w) { d = $2 - w[$1]; d = d < 0 ? -d : d; if (d > m) m = d; got++ }
    END { printf "# %d of %d values, largest difference %g\n", got, n, m; exit !(got == n && n == 115 && m <= 1e-6) }' \
  "$R/reference.txt" "$T/got.txt"

finish

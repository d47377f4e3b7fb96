#!/bin/sh
# Token inputs (issue 27 item 3): embedding(num_embeddings, embedding_dim,
# padding_idx) first in a sequential net, fed by the text plugin (bytes,
# i32 [T]); padding_idx as torch's: its row starts at zero and is never
# trained (its gradient zero), negative counted from num_embeddings, out
# of range refused; a float sample reaching an embedding is a config
# error naming the layer and the data.
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

finish

#!/bin/sh
# The recurrent layers of issue 27 in a sequential net from the config: a
# sequence classifier (lstm -> last -> linear) and a per-step one (gru,
# bidirectional, -> linear on every step) on npy data [N, T, C], and a
# char-level language model on text (embedding -> lstm -> linear), train (the
# loss finite and falling, the same at 1 and 2 threads) and pass
# gradcheck, two layers and dropout included; an lstm on an image, a bad
# hidden_size and too many parameters are config errors (exit 2) naming
# the layer; inspect lists them. Their values against torch:
# tests/test_rnn.c.
. "$LK_SRCDIR/tests/cli/lib.sh"
cd "$T" || exit 1 # errors must leave no runs/ here
PY=/usr/bin/python3
# 48 sequences of 6 steps of 3 values; the class: whether the first value's
# sum over the steps is positive (what needs the whole sequence); for the
# per-step net, float targets [N, T, 1]: that value's running sum (mse)
$PY - "$T" <<'PYEOF' || exit 1
import sys
import numpy as np
r = np.random.RandomState(0)
x = r.randn(48, 6, 3).astype(np.float32)
np.save(sys.argv[1] + "/x.npy", x)
np.save(sys.argv[1] + "/y.npy", (x[:, :, 0].sum(1) > 0).astype(np.int64))
np.save(sys.argv[1] + "/ys.npy", np.cumsum(x[:, :, 0:1], 1))
np.save(sys.argv[1] + "/img.npy", r.randn(48, 1, 4, 4).astype(np.float32))
PYEOF

config net <<INI
[loop]
max_steps = 30
seed = 0
[plugins]
step = sequential
optimizer = adam
data = npy
[npy]
x = $T/x.npy
y = $T/y.npy
batch_size = 16
shuffle = false
[sequential]
layers = lstm(16), last, linear(2)
[adam]
lr = 0.02
INI
train() { "$LOOPKIT" train "$@" --quiet >"$T/train.out" 2>&1; }
losses() { awk -F, 'NR > 1 && $3 != "" { print $3 }' "$1/metrics.csv"; }
falls() { # RUN: 30 finite losses, the last fifth's mean below the first's
  losses "$1" | awk '
    { n++; if ($1 !~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/) bad++; v[n] = $1 }
    END { for (i = 1; i <= 6; i++) { a += v[i]; b += v[n - 6 + i] }
          exit !(n == 30 && !bad && b < 0.8 * a) }'
}
check "lstm -> last -> linear trains" train "$T/net.ini" --out "$T/run"
check "... 30 finite losses, falling" falls "$T/run"
losses "$T/run" >"$T/l1"
check "the same losses at 2 threads, bit for bit" sh -c "
  '$LOOPKIT' train '$T/net.ini' --quiet --out '$T/run2' --set loop.threads=2 >/dev/null 2>&1 &&
  awk -F, 'NR > 1 && \$3 != \"\" { print \$3 }' '$T/run2/metrics.csv' | cmp -s - '$T/l1'"
SEQ='GRU(8, bidirectional=true), linear(1)'
check "a bidirectional gru with a linear on every step trains on targets [N, T, 1] (mse)" \
  train "$T/net.ini" --out "$T/seq" --set npy.y="$T/ys.npy" --set sequential.loss=mse --set "sequential.layers=$SEQ"
check "... 30 finite losses, falling" falls "$T/seq"
losses "$T/seq" >"$T/l2"
check "... the same at 2 threads, bit for bit" sh -c "
  '$LOOPKIT' train '$T/net.ini' --quiet --out '$T/seq2' --set loop.threads=2 \
    --set npy.y='$T/ys.npy' --set sequential.loss=mse --set 'sequential.layers=$SEQ' >/dev/null 2>&1 &&
  awk -F, 'NR > 1 && \$3 != \"\" { print \$3 }' '$T/seq2/metrics.csv' | cmp -s - '$T/l2'"
check "two layers with dropout between them train" \
  train "$T/net.ini" --out "$T/deep" --set 'sequential.layers=lstm(12, 2, dropout=0.2), last, linear(2)'
check "... 30 finite losses, falling" falls "$T/deep"

# A char-level language model (embedding -> lstm -> linear on every
# step) on text: trains, its loss falling, and loopkit generate samples
# from it.
i=0
while [ $i -lt 60 ]; do
  echo "the quick brown fox jumps over the lazy dog $i times"
  i=$((i + 1))
done >"$T/corpus.txt"
config lm <<INI
[loop]
max_steps = 30
seed = 0
[plugins]
step = sequential
optimizer = adam
data = text
[text]
path = $T/corpus.txt
batch_size = 8
val_split = 0.1
[sequential]
layers = embedding(128, 8), lstm(32), linear(128)
block_size = 12
[adam]
lr = 0.02
INI
check "embedding -> lstm -> linear trains as a char-level language model" \
  train "$T/lm.ini" --out "$T/lm"
check "... 30 finite losses, falling" falls "$T/lm"
check "... val_ppl logged" sh -c "head -1 '$T/lm/metrics.csv' | tr , '\n' | grep -qx val_ppl"
check "... and loopkit generate samples 5 tokens from it" \
  sh -c "'$LOOPKIT' generate '$T/lm.ini' --ckpt '$T/lm/checkpoints/last.ckpt' --tokens 5 \
    --prompt 'the quick brown' 2>/dev/null | wc -c | grep -qx 20"

# examples/text-lstm.ini, shortened (3 steps, 32 hidden units, 2
# validation batches): trains on the Jargon File, logs its validation
# loss, and loopkit generate samples from its checkpoint (the prompt at
# least the net's 64 bytes: sequential refuses a shorter context).
EX="$LK_SRCDIR/examples/text-lstm.ini"
P='hacker n. [originally, someone who makes furniture with an axe] 1.' # 66
if [ ! -f /usr/share/doc/jargon-text/jargon.txt.gz ]; then
  ok "examples/text-lstm.ini # SKIP jargon-text is not installed"
else
  check "examples/text-lstm.ini trains shortened" \
    train "$EX" --out "$T/ex" --set loop.max_steps=3 --set text.val_batches=2 \
    --set text.batches_per_epoch=3 \
    --set 'sequential.layers=embedding(256, 16), lstm(32), linear(256)'
  check "... 3 training losses and a finite val_loss" sh -c "
    test \$(awk -F, 'NR > 1 && \$3 != \"\"' '$T/ex/metrics.csv' | wc -l) -eq 3 &&
    c=\$(head -1 '$T/ex/metrics.csv' | tr , '\\n' | grep -nx val_loss | cut -d: -f1) &&
    test -n \"\$c\" && cut -d, -f\$c '$T/ex/metrics.csv' | grep -Eq '^[0-9]+\\.[0-9]'"
  check "... and loopkit generate samples 10 tokens from it" \
    sh -c "'$LOOPKIT' generate '$EX' --ckpt '$T/ex/checkpoints/last.ckpt' --tokens 10 \
      --prompt '$P' --set 'sequential.layers=embedding(256, 16), lstm(32), linear(256)' \
      2>/dev/null | wc -c | grep -qx 76"
fi

# ---- gradcheck: backward through time against central differences -------
expect 0 '^gradcheck: passed' "gradcheck passes on lstm -> last -> linear" \
  -- gradcheck "$T/net.ini"
check "... every parameter reported, none over" sh -c "grep -q '^0\.weight_hh_l0 ' '$T/out' && grep -q '^2\.bias ' '$T/out' && ! grep -q over '$T/out'"
expect 0 '^gradcheck: passed' "... on two bidirectional gru layers without biases, per step" \
  -- gradcheck "$T/net.ini" --set npy.y="$T/ys.npy" --set sequential.loss=mse \
  --set 'sequential.layers=gru(6, num_layers=2, bias=false, bidirectional=true), linear(1)'
check "... their reverse layers reported" grep -q '^0\.weight_hh_l1_reverse ' "$T/out"
expect 0 '^gradcheck: passed' "... on two lstm layers, with biases" \
  -- gradcheck "$T/net.ini" --set 'sequential.layers=lstm(5, 2), last, linear(2)'

# ---- errors -----------------------------------------------------------------
bad() { # LAYERS PATTERN DESC [SET...]
  l=$1 p=$2 d=$3
  shift 3
  expect 2 "$p" "$d" -- train "$T/net.ini" --out "$T/bad" --set "sequential.layers=$l" "$@"
}
bad 'lstm(8), last, linear(2)' 'layer 0 \(lstm\): input \[1, 4, 4\]; expected a sequence \[T, C\]' \
  "lstm on an image: exit 2 naming the layer" --set npy.x="$T/img.npy"
bad 'lstm(0), last, linear(2)' 'layer 0 "lstm\(0\)": hidden_size' \
  "lstm(0): exit 2 naming the layer"
bad 'gru(hidden_size=-3), last, linear(2)' 'layer 0 "gru\(hidden_size=-3\)": hidden_size' \
  "gru with a negative hidden_size: exit 2 naming the layer"
bad 'lstm, last, linear(2)' 'layer 0 "lstm": lstm needs hidden_size' \
  "lstm without hidden_size: exit 2"
bad 'lstm(4, 2, bidirectional=true), last, linear(2)' 'layer 0 \(lstm\): num_layers = 2, bidirectional, with biases makes 16 parameters' \
  "2 bidirectional layers with biases: more parameters than a layer holds, exit 2"
bad 'lstm(4, input_size=5), last, linear(2)' 'layer 0 \(lstm\): input_size = 5, but its input is \[6, 3\]' \
  "input_size not the input's: exit 2"
bad 'flatten, last, linear(2)' 'layer 1 \(last\): input \[18\]; expected a sequence' \
  "last on a flat input: exit 2 naming it"
check "none of the refused runs wrote a run directory" test ! -e "$T/bad"

expect 0 'lstm\(hidden_size\), gru\(hidden_size\) .*last \(the last step\)' "inspect sequential lists them" \
  -- inspect sequential
finish

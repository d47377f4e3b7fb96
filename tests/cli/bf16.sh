#!/bin/sh
# [plugins] precision = bf16-mixed: the layer kit's products in bf16 with
# f32 sums, everything else f32. A small GPT and the example CNN on a
# slice trained both ways in short form, their difference bounded; the
# bf16 run deterministic (run to run, across thread counts, resumed);
# checkpoints unchanged (f32) and switching precision at a resume said;
# on a CPU without a bf16 product instruction (emulated here with
# LOOPKIT_BF16=none, and what valgrind reports) the plugin refuses at
# create, naming what is missing. Where this CPU has no engine, what
# needs one is skipped, and says so.
. "$LK_SRCDIR/tests/cli/lib.sh"
cd "$T" || exit 1

skip() { ok "$1 # SKIP $2"; }

# ---- the engine, and the refusal ----------------------------------------
"$LOOPKIT" inspect bf16-mixed >inspect.out 2>&1
check "inspect bf16-mixed: a precision plugin" grep -q '^kinds: *precision$' inspect.out
check "inspect bf16-mixed says which engine the products take here" \
  grep -Eq '^bf16 products on this CPU: (amx_bf16|avx512_bf16|none)' inspect.out
engine=$(sed -n 's/^bf16 products on this CPU: \([a-z0-9_]*\).*/\1/p' inspect.out)
LOOPKIT_BF16=none "$LOOPKIT" inspect bf16-mixed >inspect.none 2>&1
check "... and 'none' on a CPU without one, saying the plugin refuses" \
  grep -q '^bf16 products on this CPU: none: .*bf16-mixed refuses to start' inspect.none

awk 'BEGIN { for (i = 0; i < 3000; i++) printf "%d: the cat sat on the mat.\n", (i * 7) % 97 }' >corpus.txt
# tiny NAME [--set ...]: a 2-layer GPT 32 wide, 4 epochs of 50 batches
tiny() {
  cat >tiny.ini <<INI
[loop]
max_epochs = 4
threads = 1
seed = 7
[plugins]
step = gpt
data = text
optimizer = adamw
[text]
path = $T/corpus.txt
block_size = 16
batch_size = 8
batches_per_epoch = 50
val_batches = 8
[adamw]
lr = 0.003
[gpt]
n_layer = 2
n_head = 2
n_embd = 32
block_size = 16
INI
  out=$1
  shift
  "$LOOPKIT" train tiny.ini --out "$out" --quiet "$@" >"$out.log" 2>&1
}
MIXED="--set plugins.precision=bf16-mixed"

LOOPKIT_BF16=none tiny r-none $MIXED
check "without a bf16 engine, bf16-mixed refuses at create: exit 2" test $? -eq 2
check "... naming the missing instructions" grep -q 'bf16-mixed.*AMX-BF16 nor AVX512_BF16' r-none.log
check "... before anything is trained (no run directory)" test ! -e r-none

# ---- accuracy, in short form ---------------------------------------------
val() { awk -F, 'NR > 1 && $4 != "" { v = $4 } END { print v }' "$1/metrics.csv"; }
if [ "$engine" = none ]; then
  why="this CPU (or valgrind's) has no bf16 product instruction (AMX-BF16, AVX512_BF16)"
  for t in "the tiny GPT trains with bf16-mixed" "its val_loss within 10% of f32's" \
    "bf16 products change the result" "the same bits run to run" \
    "the same bits at 1 and 2 threads" "checkpoints hold f32 parameters" \
    "a resume continues exactly" "switching precision at a resume is said" \
    "the CNN's test accuracy within 2 points of f32's"; do
    skip "$t" "$why"
  done
  finish
  exit $?
fi
tiny r32
"$LOOPKIT" train tiny.ini --out r16 $MIXED >r16.log 2>&1
check "the tiny GPT trains with bf16-mixed (engine $engine)" test $? -eq 0
check "the plugin says what it does" grep -q "^bf16-mixed: the layer kit's products in bf16 with f32 sums ($engine)" r16.log
v32=$(val r32) v16=$(val r16)
check "its val_loss within 10% of f32's: $v16 against $v32" \
  awk -v a="$v16" -v b="$v32" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && a < 0.4 && d <= 0.1 * b) }'
"$LOOPKIT" dump r32/checkpoints/last.ckpt >d32
"$LOOPKIT" dump r16/checkpoints/last.ckpt >d16
check "bf16 products change the result" sh -c '! cmp -s d32 d16'
tiny r16b $MIXED
"$LOOPKIT" dump r16b/checkpoints/last.ckpt >d16b
check "the same bits run to run" cmp -s d16 d16b
tiny r16t $MIXED --set loop.threads=2
"$LOOPKIT" dump r16t/checkpoints/last.ckpt >d16t
check "the same bits at 1 and 2 threads" cmp -s d16 d16t
check "checkpoints hold f32 parameters, as an f32 run's: the same names" \
  sh -c "sed 's/ .*//' d32 >n32 && sed 's/ .*//' d16 >n16 && cmp -s n32 n16"

# resumed at epoch 2 of 4: the same as uninterrupted
tiny r16h $MIXED --set loop.max_epochs=2
"$LOOPKIT" train tiny.ini --resume r16h/checkpoints/last.ckpt --out r16r --quiet $MIXED >r16r.log 2>&1
"$LOOPKIT" dump r16r/checkpoints/last.ckpt >d16r
check "a resume continues exactly at the same precision" cmp -s d16 d16r
check "... and says nothing of precision" sh -c '! grep -q precision r16r.log'
"$LOOPKIT" train tiny.ini --resume r16h/checkpoints/last.ckpt --out r16s >r16s.log 2>&1
check "switching precision at a resume is allowed" test $? -eq 0
check "... and said" grep -q 'trained with \[plugins\] precision = bf16-mixed, this one goes on with precision = none' r16s.log

if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  skip "the CNN's test accuracy within 2 points of f32's" "dataset-fashion-mnist is not installed"
else
  CNN="$LK_SRCDIR/examples/fashion-mnist-cnn.ini"
  for p in 32 16; do
    set -- --set loop.max_epochs=1 --set idx.limit=4000 --out "c$p" --quiet
    [ $p = 16 ] && set -- "$@" $MIXED
    "$LOOPKIT" train "$CNN" "$@" >"c$p.log" 2>&1
  done
  acc() { awk -F, 'NR > 1 && $6 != "" { a = $6 } END { print a }' "$1/metrics.csv"; }
  a32=$(acc c32) a16=$(acc c16)
  check "the CNN (4000 images, one epoch): test accuracy within 2 points of f32's: $a16 against $a32" \
    awk -v a="$a16" -v b="$a32" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0.6 && d <= 0.02) }'
fi
finish

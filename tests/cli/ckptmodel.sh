#!/bin/sh
# A checkpoint knows its model (issue 28 item 4): generate, test, validate,
# predict and export given --ckpt CKPT and no CONFIG build the model from
# the config.ini of the run directory CKPT is in (as written, relative,
# from inside the run, through a link); with a CONFIG whose model does not
# fit, the error names the first parameter that differs, both shapes, and
# the run's config.ini the checkpoint was trained with; a checkpoint in no
# run directory needs a CONFIG, and the command says so.
. "$LK_SRCDIR/tests/cli/lib.sh"
cd "$T" || exit 1

# same A B: passes when A equals B (printed on failure).
same() {
  [ "$1" = "$2" ] && return 0
  echo "# got [$1], expected [$2]"
  return 1
}
# twin DESC CMD ARGS...: loopkit CMD ARGS without a CONFIG and with the
# run's config.ini RUN_INI (loopkit CMD RUN_INI ARGS; ARGS give --ckpt)
# exit 0 with the same output.
twin() {
  desc=$1 cmd=$2
  shift 2
  "$LOOPKIT" "$cmd" "$@" >"$T/alone" 2>"$T/alone.err"
  s1=$?
  "$LOOPKIT" "$cmd" "$RUN_INI" "$@" >"$T/with" 2>&1
  s2=$?
  if [ $s1 -ne 0 ] || [ $s2 -ne 0 ]; then
    not_ok "$desc" "exit status $s1 without CONFIG, $s2 with $RUN_INI" \
      "$(head -c 1000 "$T/alone.err")"
  elif [ ! -s "$T/alone" ] || ! cmp -s "$T/alone" "$T/with"; then
    not_ok "$desc" "the outputs differ (or are empty)"
  else
    ok "$desc"
  fi
}

# ---- a classifier, resized at train time ------------------------------------
awk 'BEGIN { print "a,b,label"
  for (i = 0; i < 60; i++) { c = i % 3; printf "%.4f,%.4f,%d\n", c + (i * 37 % 100) / 66, (c == 1) + (i * 53 % 100) / 66, c } }' >train.csv
awk 'BEGIN { print "a,b,label"
  for (i = 0; i < 12; i++) { c = i % 3; printf "%.4f,%.4f,%d\n", c + (i * 71 % 100) / 66, (c == 1) + (i * 29 % 100) / 66, c } }' >test.csv
config cls <<INI
[loop]
max_epochs = 2
[plugins]
step = mlp
optimizer = sgd
data = csv
callbacks = checkpoint, acc:checkpoint
[csv]
path = $T/train.csv
test = $T/test.csv
val_split = 0.25
batch_size = 10
[mlp]
layers = 2,8,3
[sgd]
lr = 0.3
[checkpoint]
monitor = val_loss
[acc]
monitor = val_acc
mode = max
INI
# train DESC ARGS...: a run the checks below use; reported only when it
# fails (it is no behaviour of what is tested here).
train() {
  desc=$1
  shift
  "$LOOPKIT" train "$@" --quiet >"$T/out" 2>&1 ||
    not_ok "$desc" "$(head -c 1000 "$T/out")"
}
train "a classifier trained with --set mlp.layers=2,16,3 (the config says 2,8,3)" \
  cls.ini --out r-cls --set mlp.layers=2,16,3
CK=r-cls/checkpoints/last.ckpt
RUN_INI=r-cls/config.ini

twin "test --ckpt alone: the run's config.ini, the same metrics" test --ckpt "$CK"
check "... which are test_loss and test_acc" grep -q '^test_acc ' "$T/alone"
twin "validate --ckpt alone: the same metrics" validate --ckpt "$CK"
twin "predict --ckpt alone: the same CSV" predict --ckpt "$CK"
check "... a row per test sample" test "$(wc -l <"$T/alone")" -eq 13
twin "predict --ckpt best.ckpt alone: the same CSV" predict --ckpt r-cls/checkpoints/best.ckpt
twin "validate --ckpt of a named checkpoint callback (checkpoints/acc/best.ckpt)" \
  validate --ckpt r-cls/checkpoints/acc/best.ckpt
"$LOOPKIT" export --ckpt "$CK" -o alone.safetensors >/dev/null 2>&1
s1=$?
"$LOOPKIT" export "$RUN_INI" --ckpt "$CK" -o with.safetensors >/dev/null 2>&1
s2=$?
check "export --ckpt CKPT -o FILE alone: the file export CONFIG --ckpt writes" \
  sh -c "[ $s1 -eq 0 ] && [ $s2 -eq 0 ] && cmp -s alone.safetensors with.safetensors"

# Paths: relative from inside the run, absolute, and a link to a run's
# checkpoint from outside it.
(cd r-cls && "$LOOPKIT" test --ckpt checkpoints/last.ckpt >"$T/in-run" 2>&1)
"$LOOPKIT" test "$RUN_INI" --ckpt "$CK" >ref.test 2>&1
check "test --ckpt checkpoints/last.ckpt from inside the run" cmp -s in-run ref.test
(cd r-cls/checkpoints && "$LOOPKIT" test --ckpt last.ckpt >"$T/in-ckpts" 2>&1)
check "test --ckpt last.ckpt from inside checkpoints/" cmp -s in-ckpts ref.test
"$LOOPKIT" test --ckpt "$T/$CK" >abs.test 2>&1
check "test --ckpt with an absolute path" cmp -s abs.test ref.test
mkdir models
ln -s ../r-cls/checkpoints/last.ckpt models/cls.ckpt
"$LOOPKIT" test --ckpt models/cls.ckpt >link.test 2>&1
check "test --ckpt through a symbolic link to a run's checkpoint" cmp -s link.test ref.test

# The original config no longer fits: the first differing parameter, both
# shapes, and the config the checkpoint was trained with.
mismatch="r-cls/checkpoints/last.ckpt: parameter layer0.weight is f32\\[16,2\\] there but f32\\[8,2\\] in this config's model \\(mlp\\); it was trained with r-cls/config.ini"
expect 2 "$mismatch" "test with the original config: names layer0.weight, both shapes and r-cls/config.ini" \
  -- test cls.ini --ckpt "$CK"
expect 2 "$mismatch" "predict with the original config: the same" \
  -- predict cls.ini --ckpt "$CK"
expect 2 "$mismatch" "export with the original config: the same" \
  -- export cls.ini --ckpt "$CK" -o x.safetensors
expect 2 "has no parameter layer2.weight, which this config's model \\(mlp\\) has as f32\\[4,3\\]: is it a checkpoint of another model\\?; it was trained with r-cls/config.ini" \
  "a missing parameter: named with the model's shape and the run's config.ini" \
  -- test cls.ini --ckpt "$CK" --set mlp.layers=2,16,3,4

# A checkpoint copied out of its run: a CONFIG is needed, and why.
cp "$CK" lone.ckpt
for c in test validate predict generate; do
  expect 2 "$c: a CONFIG is needed: lone.ckpt is in no run directory, so the config it was trained with is not known" \
    "$c --ckpt on a checkpoint outside any run directory: exit 2, a CONFIG is needed" \
    -- $c --ckpt lone.ckpt
done
expect 2 "no such checkpoint" "a missing checkpoint without CONFIG is named" \
  -- test --ckpt nowhere.ckpt

# ---- generate: a GPT resized at train time ------------------------------------
awk 'BEGIN { for (i = 0; i < 400; i++) printf "%d: the cat sat on the mat.\n", (i * 7) % 97 }' >corpus.txt
config gpt <<INI
[loop]
max_steps = 3
threads = 1
seed = 7
[plugins]
step = gpt
data = text
optimizer = adamw
[text]
path = $T/corpus.txt
block_size = 8
batch_size = 4
batches_per_epoch = 3
val_batches = 1
[adamw]
lr = 0.01
[gpt]
n_layer = 1
n_head = 2
n_embd = 32
block_size = 8
INI
train "a tiny GPT trained with --set gpt.n_embd=16 (the config says 32)" \
  gpt.ini --out r-gpt --set gpt.n_embd=16
CK=r-gpt/checkpoints/last.ckpt
RUN_INI=r-gpt/config.ini
twin "generate --ckpt alone: the run's config.ini, the same text" \
  generate --ckpt "$CK" --tokens 20 --prompt 'the '
check "... the prompt and 20 bytes" test "$(wc -c <"$T/alone")" -eq 24
expect 2 "$CK: parameter transformer.wte.weight is f32\\[256,16\\] there but f32\\[256,32\\] in this config's model \\(gpt\\); it was trained with r-gpt/config.ini" \
  "generate with the original config: the first differing parameter, both shapes, r-gpt/config.ini" \
  -- generate gpt.ini --ckpt "$CK" --tokens 5

finish

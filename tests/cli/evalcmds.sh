#!/bin/sh
# loopkit test, validate and predict: a checkpoint evaluated or its model's
# outputs written without touching the run that made it; and [loop]
# test_ckpt = best, the end-of-run test on best.ckpt. What the commands
# print is held against the training run's own metrics.csv.
. "$LK_SRCDIR/tests/cli/lib.sh"

# same A B: passes when A equals B (printed on failure).
same() {
  [ "$1" = "$2" ] && return 0
  echo "# got [$1], expected [$2]"
  return 1
}
# last NAME CSV: the last value of column NAME in metrics.csv CSV.
last() {
  awk -F, -v c="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next }
    k && $k != "" { v = $k } END { print v }' "$2"
}
# metric NAME FILE: the value of NAME in loopkit test's output FILE.
metric() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }
# tree DIR: every file of DIR with its checksum, and every directory.
tree() { (cd "$1" && find . | sort && find . -type f | sort | xargs cksum); }
lk() { "$LOOPKIT" "$@" 2>"$T/err"; }

# Three well separated classes of two features; the training file holds
# out a quarter for validation, the test file has 25 samples.
awk 'BEGIN { print "a,b,label"
  for (i = 0; i < 120; i++) { c = i % 3; printf "%.4f,%.4f,%d\n", c + (i * 37 % 100) / 66, (c == 1) + (i * 53 % 100) / 66, c } }' >"$T/train.csv"
awk 'BEGIN { print "a,b,label"
  for (i = 0; i < 25; i++) { c = i % 3; printf "%.4f,%.4f,%d\n", c + (i * 71 % 100) / 66, (c == 1) + (i * 29 % 100) / 66, c } }' >"$T/test.csv"
config cls <<INI
[loop]
max_epochs = 5
[plugins]
step = softmax
optimizer = sgd
data = csv
callbacks = checkpoint
[csv]
path = $T/train.csv
test = $T/test.csv
val_split = 0.25
batch_size = 10
[softmax]
inputs = 2
classes = 3
[sgd]
lr = 0.3
momentum = 0.9
[checkpoint]
monitor = val_loss
INI
R=$T/run
"$LOOPKIT" train "$T/cls.ini" --out "$R" --quiet >/dev/null 2>&1
check "a classifier trained with a test split" test -s "$R/checkpoints/last.ckpt"
tree "$R" >"$T/before"
# The commands run from an empty directory: they must not make runs/ in it.
mkdir "$T/cwd"
cd "$T/cwd" || exit 1

# ---- test and validate ----
lk test "$T/cls.ini" --ckpt "$R/checkpoints/last.ckpt" >"$T/test.out"
check "test exits 0" test $? -eq 0
check "test prints test_loss and test_acc, one a line" \
  same "$(awk '{ print $1 }' "$T/test.out" | tr '\n' ' ')" "test_loss test_acc "
check "test on last.ckpt: the training run's test_loss" \
  same "$(metric test_loss "$T/test.out")" "$(last test_loss "$R/metrics.csv")"
check "test on last.ckpt: the training run's test_acc" \
  same "$(metric test_acc "$T/test.out")" "$(last test_acc "$R/metrics.csv")"
lk validate "$T/cls.ini" --ckpt "$R/checkpoints/last.ckpt" >"$T/val.out"
check "validate on last.ckpt: the last epoch's val_loss" \
  same "$(metric val_loss "$T/val.out")" "$(last val_loss "$R/metrics.csv")"
check "validate on last.ckpt: the last epoch's val_acc" \
  same "$(metric val_acc "$T/val.out")" "$(last val_acc "$R/metrics.csv")"
best_val=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "val_loss") k = i; next }
  $k != "" && (b == "" || $k < b) { b = $k } END { print b }' "$R/metrics.csv")
lk validate "$T/cls.ini" --ckpt "$R/checkpoints/best.ckpt" >"$T/val-best.out"
check "validate on best.ckpt: the smallest val_loss of the run" \
  same "$(metric val_loss "$T/val-best.out")" "$best_val"
check "best.ckpt is not the last epoch's here (the test below tells them apart)" \
  test "$best_val" != "$(last val_loss "$R/metrics.csv")"

# ---- predict ----
lk predict "$T/cls.ini" --ckpt "$R/checkpoints/last.ckpt" >"$T/pred.csv"
check "predict exits 0" test $? -eq 0
check "predict: header index,pred,p0,p1,p2" same "$(head -1 "$T/pred.csv")" "index,pred,p0,p1,p2"
check "predict: one row a test sample (25), indexed 0 to 24" \
  same "$(awk -F, 'NR > 1 { s = s $1 " " } END { print NR - 1 ":" s }' "$T/pred.csv")" \
  "25:$(seq 0 24 | tr '\n' ' ')"
check "predict: each row's probabilities sum to 1" \
  awk -F, 'NR > 1 { s = $3 + $4 + $5; if (s < 1 - 1e-12 || s > 1 + 1e-12) bad = 1 } END { exit bad }' "$T/pred.csv"
check "predict: each row's class is its largest probability" \
  awk -F, 'NR > 1 { a = 0; for (j = 1; j < 3; j++) if ($(3 + j) > $(3 + a)) a = j; if (a != $2) bad = 1 } END { exit bad }' "$T/pred.csv"
acc=$(awk -F, 'NR == FNR { if (FNR > 1) y[FNR - 1] = $3; next }
  FNR > 1 { hits += $2 == y[FNR - 1]; n++ } END { printf "%.6f", hits / n }' "$T/test.csv" "$T/pred.csv")
check "predict: its classes against the test labels give test's test_acc" \
  same "$acc" "$(metric test_acc "$T/test.out" | awk '{ printf "%.6f", $1 }')"
lk predict "$T/cls.ini" --ckpt "$R/checkpoints/last.ckpt" -o "$T/pred-o.csv" >"$T/pred-o.stdout"
check "predict -o FILE: FILE holds what the standard output would" cmp -s "$T/pred.csv" "$T/pred-o.csv"
check "predict -o FILE: nothing on the standard output, no temporary file left" \
  sh -c "[ ! -s '$T/pred-o.stdout' ] && [ -z \"\$(ls '$T' | grep tmp)\" ]"
lk predict "$T/cls.ini" --ckpt "$R/checkpoints/last.ckpt" --set "csv.test=$T/train.csv" >"$T/pred-train.csv"
check "predict --set csv.test=FILE: one row per sample of FILE (120)" \
  same "$(($(wc -l <"$T/pred-train.csv") - 1))" 120
# A file to predict has no labels: the test file without its label column.
cut -d, -f1,2 "$T/test.csv" >"$T/unlabeled.csv"
lk predict "$T/cls.ini" --ckpt "$R/checkpoints/last.ckpt" --set "csv.test=$T/unlabeled.csv" >"$T/pred-unl.csv"
check "predict on a file without the label column: exit 0" test $? -eq 0
check "predict on a file without the label column: the labelled file's rows" \
  cmp -s "$T/pred.csv" "$T/pred-unl.csv"
check "predict on a file without the label column: a warning names it" \
  grep -q "unlabeled.csv has no label column" "$T/err"
cut -d, -f1 "$T/test.csv" >"$T/onecol.csv"
expect 2 'onecol.csv:1: 1 columns, the training file has 3 \(or 2 without the label column\)' \
  "predict on a file two columns short: refused naming file:line" -- \
  predict "$T/cls.ini" --ckpt "$R/checkpoints/last.ckpt" --set "csv.test=$T/onecol.csv"

# A regression: linear's outputs, whose squared error is test's test_loss.
awk 'BEGIN { print "a,b,y"; for (i = 0; i < 40; i++) { a = (i * 37 % 40) / 40; b = (i * 11 % 40) / 40; printf "%.4f,%.4f,%.4f\n", a, b, 2 * a - b + 0.5 + (i % 5 - 2) / 100 } }' >"$T/reg.csv"
config reg <<INI
[loop]
max_epochs = 10
[plugins]
step = linear
optimizer = sgd
data = csv
[csv]
path = $T/reg.csv
test = $T/reg.csv
labels = float
batch_size = 8
[linear]
inputs = 2
[sgd]
lr = 0.3
INI
"$LOOPKIT" train "$T/reg.ini" --out "$T/reg" --quiet >/dev/null 2>&1
lk predict "$T/reg.ini" --ckpt "$T/reg/checkpoints/last.ckpt" >"$T/reg-pred.csv"
check "predict, regression: header index,y0 and one row a sample" \
  same "$(head -1 "$T/reg-pred.csv"):$(($(wc -l <"$T/reg-pred.csv") - 1))" "index,y0:40"
mse=$(awk -F, 'NR == FNR { if (FNR > 1) y[FNR - 1] = $3; next }
  FNR > 1 { d = $2 - y[FNR - 1]; s += d * d; n++ } END { printf "%.5g", s / n }' "$T/reg.csv" "$T/reg-pred.csv")
check "predict, regression: the outputs' squared error is the run's test_loss" \
  same "$mse" "$(last test_loss "$T/reg/metrics.csv" | awk '{ printf "%.5g", $1 }')"

# Batch norm's running statistics are the model's state: test loads them.
sed 's/^step = softmax/step = sequential/; s/^\[softmax\]/[sequential]\nlayers = linear(8), batchnorm1d, relu, linear(3)/; /^inputs = \|^classes = /d' \
  "$T/cls.ini" >"$T/seq.ini"
"$LOOPKIT" train "$T/seq.ini" --out "$T/seq" --quiet >/dev/null 2>&1
lk test "$T/seq.ini" --ckpt "$T/seq/checkpoints/last.ckpt" >"$T/seq.out"
check "test, sequential with batch norm: the training run's test_loss" \
  same "$(metric test_loss "$T/seq.out")" "$(last test_loss "$T/seq/metrics.csv")"
lk predict "$T/seq.ini" --ckpt "$T/seq/checkpoints/last.ckpt" >"$T/seq-pred.csv"
check "predict, sequential: a classifier's rows" \
  same "$(head -1 "$T/seq-pred.csv"):$(($(wc -l <"$T/seq-pred.csv") - 1))" "index,pred,p0,p1,p2:25"
sed 's/^step = softmax/step = mlp/; s/^\[softmax\]/[mlp]\nlayers = 2,8,3/; /^inputs = \|^classes = /d' \
  "$T/cls.ini" >"$T/mlp.ini"
"$LOOPKIT" train "$T/mlp.ini" --out "$T/mlp" --quiet >/dev/null 2>&1
lk test "$T/mlp.ini" --ckpt "$T/mlp/checkpoints/last.ckpt" >"$T/mlp.out"
lk predict "$T/mlp.ini" --ckpt "$T/mlp/checkpoints/last.ckpt" >"$T/mlp-pred.csv"
acc=$(awk -F, 'NR == FNR { if (FNR > 1) y[FNR - 1] = $3; next }
  FNR > 1 { hits += $2 == y[FNR - 1]; n++ } END { printf "%.6f", hits / n }' "$T/test.csv" "$T/mlp-pred.csv")
check "test and predict, mlp: predict's classes give test's test_acc" \
  same "$acc" "$(metric test_acc "$T/mlp.out" | awk '{ printf "%.6f", $1 }')"

# ---- [loop] test_ckpt ----
"$LOOPKIT" train "$T/cls.ini" --out "$T/best" --set loop.test_ckpt=best --quiet >/dev/null 2>&1
check "test_ckpt = best: trained (exit 0)" test $? -eq 0
lk test "$T/cls.ini" --ckpt "$T/best/checkpoints/best.ckpt" >"$T/best.out"
check "test_ckpt = best: metrics.csv's test_loss is best.ckpt's" \
  same "$(last test_loss "$T/best/metrics.csv")" "$(metric test_loss "$T/best.out")"
check "test_ckpt = best: ... which is not the last model's" \
  test "$(last test_loss "$T/best/metrics.csv")" != "$(last test_loss "$R/metrics.csv")"
"$LOOPKIT" dump "$R/checkpoints/last.ckpt" >"$T/dump-last"
"$LOOPKIT" dump "$T/best/checkpoints/last.ckpt" >"$T/dump-best"
check "test_ckpt = best: last.ckpt still holds the trained model, as with last" \
  cmp -s "$T/dump-last" "$T/dump-best"
head -n -1 "$R/metrics.csv" >"$T/rows-last"
head -n -1 "$T/best/metrics.csv" >"$T/rows-best"
check "test_ckpt = best: metrics.csv's rows before the test are test_ckpt = last's" \
  cmp -s "$T/rows-last" "$T/rows-best"
# A named checkpoint callback writes its best.ckpt in checkpoints/NAME/,
# one with dirpath in that directory: test_ckpt = best tests that file.
"$LOOPKIT" train "$T/cls.ini" --out "$T/bestn" --set loop.test_ckpt=best \
  --set plugins.callbacks=keep:checkpoint --set keep.monitor=val_loss --quiet >/dev/null 2>&1
check "test_ckpt = best, named callback: trained (exit 0)" test $? -eq 0
check "test_ckpt = best, named callback: its best.ckpt is in checkpoints/keep" \
  test -s "$T/bestn/checkpoints/keep/best.ckpt"
check "test_ckpt = best, named callback: the test is that best.ckpt's" \
  same "$(last test_loss "$T/bestn/metrics.csv")" "$(metric test_loss "$T/best.out")"
"$LOOPKIT" train "$T/cls.ini" --out "$T/bestd" --set loop.test_ckpt=best \
  --set checkpoint.dirpath=kept --quiet >/dev/null 2>&1
check "test_ckpt = best, dirpath: trained (exit 0)" test $? -eq 0
check "test_ckpt = best, dirpath: the test is RUN_DIR/kept/best.ckpt's" \
  same "$(last test_loss "$T/bestd/metrics.csv")" "$(metric test_loss "$T/best.out")"
check "test_ckpt = best in the effective config" grep -qx 'test_ckpt = best' "$T/best/config.ini"
check "test_ckpt = last by default in the effective config" grep -qx 'test_ckpt = last' "$R/config.ini"
expect 1 'test_ckpt = best, but .*best.ckpt was never written' \
  "test_ckpt = best when the checkpoint callback kept nothing (no validation): exit 1" -- \
  train "$T/cls.ini" --out "$T/noval" --set loop.test_ckpt=best --set csv.val_split=0 --quiet
expect 2 'loop.test_ckpt = best needs a checkpoint callback' \
  "test_ckpt = best without a checkpoint callback: a config error naming the key" -- \
  train "$T/reg.ini" --out "$T/nocb" --set loop.test_ckpt=best
check "... and no run directory is left" test ! -e "$T/nocb"
expect 2 'cls.ini.*checkpoint callback|checkpoint callback.*save_top_k' \
  "test_ckpt = best with save_top_k = 0 keeps no best: a config error" -- \
  train "$T/cls.ini" --out "$T/top0" --set loop.test_ckpt=best --set checkpoint.save_top_k=0
expect 2 'loop.test_ckpt = "first": expected one of last\|best' "test_ckpt = first is refused" -- \
  train "$T/cls.ini" --out "$T/first" --set loop.test_ckpt=first

# ---- errors ----
expect 2 'test: no --ckpt' "test without --ckpt: exit 2" -- test "$T/cls.ini"
# (--ckpt alone takes its run's config.ini: tests/cli/ckptmodel.sh)
expect 2 'validate: no --ckpt' "validate without a config or a checkpoint: exit 2" -- validate
expect 2 'predict: unexpected "--bogus"' "predict with an unknown option: exit 2" -- \
  predict "$T/cls.ini" --ckpt "$R/checkpoints/last.ckpt" --bogus
expect 2 'nope.ckpt: no such checkpoint' "test with a missing checkpoint: exit 2" -- \
  test "$T/cls.ini" --ckpt "$T/nope.ckpt"
echo garbage >"$T/bad.ckpt"
expect 2 'bad.ckpt: not a loopkit checkpoint' "predict with an unreadable checkpoint: exit 2" -- \
  predict "$T/cls.ini" --ckpt "$T/bad.ckpt"
expect 2 'has no parameter layer0.weight.*another model' "test with another model's checkpoint: exit 2" -- \
  test "$T/mlp.ini" --ckpt "$R/checkpoints/last.ckpt"
expect 2 'parameter weight is f32\[3,2\] there but f32\[4,2\]' "validate with another shape: exit 2" -- \
  validate "$T/cls.ini" --ckpt "$R/checkpoints/last.ckpt" --set softmax.classes=4
expect 2 'has no parameter weight, which this config.s model \(softmax\) has' "the sequential checkpoint for the softmax config: exit 2" -- \
  test "$T/cls.ini" --ckpt "$T/seq/checkpoints/last.ckpt"
expect 2 'validate: data plugin csv has no validation split' "validate without a validation split: exit 2" -- \
  validate "$T/cls.ini" --ckpt "$R/checkpoints/last.ckpt" --set csv.val_split=0
sed '/^test = /d' "$T/reg.ini" >"$T/notest.ini"
expect 2 'test: data plugin csv has no test split' "test without a test split: exit 2" -- \
  test "$T/notest.ini" --ckpt "$T/reg/checkpoints/last.ckpt"
expect 2 'predict: data plugin csv has no test split' "predict without a test split: exit 2" -- \
  predict "$T/notest.ini" --ckpt "$T/reg/checkpoints/last.ckpt" -o "$T/none.csv"
check "... and -o FILE is not written" test ! -e "$T/none.csv"
expect 2 'is the checkpoint itself' "predict -o CKPT is refused" -- \
  predict "$T/cls.ini" --ckpt "$R/checkpoints/last.ckpt" -o "$R/checkpoints/last.ckpt"
config lin <<INI
[plugins]
step = linreg
optimizer = sgd
data = synthetic
[sgd]
lr = 0.001
INI
"$LOOPKIT" train "$T/lin.ini" --out "$T/lin" --quiet >/dev/null 2>&1
expect 2 'linreg \(the step\) has no predict_step' "predict with a step plugin without predict_step: exit 2" -- \
  predict "$T/lin.ini" --ckpt "$T/lin/checkpoints/last.ckpt"
expect 0 'test_loss' "test works with a step plugin without predict_step" -- \
  test "$T/lin.ini" --ckpt "$T/lin/checkpoints/last.ckpt"

# ---- the run that made the checkpoint ----
tree "$R" >"$T/after"
check "the run directory is untouched by test, validate and predict" cmp -s "$T/before" "$T/after"
check "no run directory made where the commands ran" test -z "$(ls -A "$T/cwd")"
finish

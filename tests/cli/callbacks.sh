#!/bin/sh
# The bundled callbacks: early_stopping, checkpoint, ema, lr_monitor. Where a
# behaviour follows from metrics.csv (when to stop, which checkpoints are
# the best), awk recomputes it from an uninterrupted run's metrics.csv.
. "$LK_SRCDIR/tests/cli/lib.sh"

# column NAME CSV: "step epoch value" for each row where column NAME is set.
column() {
  awk -F, -v c="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next }
    k && $k != "" { print $1, $2, $k }' "$2"
}
# rows NAME CSV: how many rows have column NAME set.
rows() { column "$1" "$2" | wc -l | tr -d ' '; }
# same A B: passes when A equals B (printed on failure).
same() {
  [ "$1" = "$2" ] && return 0
  echo "# got [$1], expected [$2]"
  return 1
}
train() { "$LOOPKIT" train "$@" --quiet >/dev/null 2>&1; }
# plain NAME: $T/NAME-plain.ini, $T/NAME.ini without its callbacks (the
# callbacks' sections come last in these configs).
plain() {
  sed '/^callbacks = /d; /^\[ema\]/,$d; /^\[lr_monitor\]/,$d' "$T/$1.ini" >"$T/$1-plain.ini"
}

# Linear regression whose val_loss falls until epoch 10, then rises.
config reg <<INI
[loop]
max_epochs = 30
[plugins]
step = linreg
optimizer = sgd
data = synthetic
[synthetic]
n_train = 32
n_val = 16
n_test = 0
batch_size = 8
noise = 0.5
[sgd]
lr = 0.05
INI
# The same with momentum: val_loss goes up and down.
config osc <<INI
[loop]
max_epochs = 12
[plugins]
step = linreg
optimizer = sgd
data = synthetic
[synthetic]
n_train = 32
n_val = 16
n_test = 0
batch_size = 8
noise = 0.5
[sgd]
lr = 0.1
momentum = 0.9
INI
# One optimizer step per epoch; probe logs its first weight as metric w0
# before the step: 1, 0.9, 0.8, ... (constant gradient 1, lr 0.1).
config probe <<INI
[loop]
max_epochs = 10
[plugins]
step = probe
optimizer = probe
data = synthetic
[synthetic]
n_train = 1
n_val = 0
n_test = 0
batch_size = 1
[probe]
grad = 1
lr = 0.1
INI
train "$T/reg.ini" --out "$T/reg"
train "$T/osc.ini" --out "$T/osc"

# ---- listing ----
"$LOOPKIT" plugins >"$T/plugins.txt" 2>&1
for p in early_stopping checkpoint ema lr_monitor; do
  check "plugins lists $p as a callback with a summary" \
    awk -v p="$p" '$1 == p && $2 == "callback" { getline; found = NF > 0 } END { exit !found }' "$T/plugins.txt"
done
expect 0 'patience +int \[1, inf\) +default 3' "inspect early_stopping lists patience and its range" -- inspect early_stopping
check "inspect early_stopping lists monitor, mode, min_delta, check_finite" \
  sh -c "grep -q 'monitor .*default val_loss' '$T/out' && grep -q 'mode .*min|max .*default min' '$T/out' \
    && grep -q 'min_delta .*\[0, inf) default 0' '$T/out' && grep -q 'check_finite .*default true' '$T/out'"
expect 0 'save_top_k +int \[-1, 100000\] +default 1' "inspect checkpoint lists save_top_k and its range" -- inspect checkpoint
expect 0 'decay +double \[0, 1\) +default 0.999' "inspect ema lists decay and its range" -- inspect ema
check "inspect ema lists apply_at_end" grep -q 'apply_at_end .*default true' "$T/out"
expect 0 'logging_interval +step\|epoch +default step' "inspect lr_monitor lists logging_interval" -- inspect lr_monitor

# ---- early_stopping ----
# es_checks PATIENCE MIN_DELTA [max]: from values on stdin, how many checks
# Lightning's rule makes before it stops (all of them if it never does).
es_checks() {
  awk -v p="$1" -v d="$2" -v max="${3:-}" '{
      n++
      better = max ? $1 > best + d : $1 < best - d
      if (n == 1 || better) { best = $1; wait = 0 }
      else if (++wait >= p) exit
    } END { print n }'
}
column val_loss "$T/reg/metrics.csv" | awk '{ print $3 }' >"$T/reg.val"
expect 0 'early_stopping: val_loss did not improve by more than 0 for 2 checks; best 0.292082; stopping at epoch 12' \
  "early_stopping says why it stops" \
  -- train "$T/reg.ini" --out "$T/es" --set plugins.callbacks=early_stopping --set early_stopping.patience=2
check "early_stopping: best at validation 11, stopped after patience 2 more (13 validations)" \
  same "$(rows val_loss "$T/es/metrics.csv")" 13
check "early_stopping: as many validations as the rule computed from the full run" \
  same "$(rows val_loss "$T/es/metrics.csv")" "$(es_checks 2 0 <"$T/reg.val")"
check "early_stopping: the stopped run's metrics.csv is the full run's first rows" \
  sh -c "head -n $(wc -l <"$T/es/metrics.csv") '$T/reg/metrics.csv' | cmp -s - '$T/es/metrics.csv'"
train "$T/reg.ini" --out "$T/es-delta" --set plugins.callbacks=early_stopping \
  --set early_stopping.patience=2 --set early_stopping.min_delta=0.01
check "early_stopping min_delta 0.01: stops where the rule says (11 validations)" \
  same "$(rows val_loss "$T/es-delta/metrics.csv"):$(es_checks 2 0.01 <"$T/reg.val")" 11:11
train "$T/reg.ini" --out "$T/es-max" --set plugins.callbacks=early_stopping \
  --set early_stopping.patience=4 --set early_stopping.mode=max
check "early_stopping mode max: a falling val_loss stops after patience + 1 validations" \
  same "$(rows val_loss "$T/es-max/metrics.csv"):$(es_checks 4 0 max <"$T/reg.val")" 5:5

# A training metric is checked at each epoch's end.
train "$T/probe.ini" --out "$T/w-max" --set plugins.callbacks=early_stopping \
  --set early_stopping.monitor=w0 --set early_stopping.mode=max --set early_stopping.patience=2
check "early_stopping on training metric w0, mode max: 3 epochs" same "$(rows w0 "$T/w-max/metrics.csv")" 3
train "$T/probe.ini" --out "$T/w-min" --set plugins.callbacks=early_stopping \
  --set early_stopping.monitor=w0 --set early_stopping.patience=2
check "early_stopping on w0, mode min: it keeps improving, all 10 epochs" same "$(rows w0 "$T/w-min/metrics.csv")" 10
train "$T/probe.ini" --out "$T/w-d25" --set plugins.callbacks=early_stopping \
  --set early_stopping.monitor=w0 --set early_stopping.patience=2 --set early_stopping.min_delta=0.25
check "early_stopping min_delta 0.25, steps of 0.1: 3 epochs" same "$(rows w0 "$T/w-d25/metrics.csv")" 3
# 0.9 is no improvement on 1 by more than 0.15, 0.8 is: best moves every
# second check, wait never reaches 2.
train "$T/probe.ini" --out "$T/w-d15" --set plugins.callbacks=early_stopping \
  --set early_stopping.monitor=w0 --set early_stopping.patience=2 --set early_stopping.min_delta=0.15
check "early_stopping min_delta 0.15 compares with the best: all 10 epochs" same "$(rows w0 "$T/w-d15/metrics.csv")" 10

# check_finite: probe's loss is NaN at its 4th training_step (epoch 3).
expect 0 'early_stopping: loss = nan is not finite; best 0.64; stopping at epoch 3' \
  "check_finite: a NaN monitor stops the run at once, with a message" \
  -- train "$T/probe.ini" --out "$T/nan" --set plugins.callbacks=early_stopping \
  --set early_stopping.monitor=loss --set probe.nan_loss_at=3
check "check_finite: 4 epochs" same "$(rows w0 "$T/nan/metrics.csv")" 4
train "$T/probe.ini" --out "$T/nan-ok" --set plugins.callbacks=early_stopping --set early_stopping.monitor=loss \
  --set probe.nan_loss_at=3 --set early_stopping.check_finite=false --set early_stopping.patience=2
check "check_finite = false: a NaN is one check without improvement, the run goes on" \
  same "$(rows w0 "$T/nan-ok/metrics.csv")" 10

# best and wait survive a resume: 12 epochs end with wait 1; 1 more stops.
train "$T/reg.ini" --out "$T/es-res" --set plugins.callbacks=early_stopping \
  --set early_stopping.patience=2 --set loop.max_epochs=12
check "early_stopping before the resume: not stopped" same "$(rows val_loss "$T/es-res/metrics.csv")" 12
train "$T/reg.ini" --resume "$T/es-res/checkpoints/last.ckpt" --set plugins.callbacks=early_stopping \
  --set early_stopping.patience=2
check "early_stopping resumed: stops where the uninterrupted run did" cmp -s "$T/es/metrics.csv" "$T/es-res/metrics.csv"

expect 1 'early_stopping: monitor val_accuracy was never logged: the validation logged val_loss, val_mae' \
  "a val_* monitor that was not logged: the message lists what was" \
  -- train "$T/reg.ini" --out "$T/es-bad1" --set plugins.callbacks=early_stopping --set early_stopping.monitor=val_accuracy
expect 1 'monitor accuracy was never logged: expected loss or a metric that the model.s training_step reports' \
  "a training monitor that was not logged: the message says what is expected" \
  -- train "$T/reg.ini" --out "$T/es-bad2" --set plugins.callbacks=early_stopping --set early_stopping.monitor=accuracy
expect 0 'val_loss was never checked: no validation ran \(is there a validation split' \
  "no validation split: a warning" \
  -- train "$T/reg.ini" --out "$T/es-noval" --set plugins.callbacks=early_stopping --set synthetic.n_val=0 \
  --set loop.max_epochs=2
config es-bad <<INI
[loop]
max_epochs = 1
[plugins]
step = linreg
optimizer = sgd
data = synthetic
callbacks = early_stopping
[early_stopping]
mode = up
[sgd]
lr = 0.001
INI
expect 2 'es-bad.ini:9: option early_stopping.mode: expected one of min\|max, got "up"' \
  "early_stopping: bad mode names file:line" -- train "$T/es-bad.ini" --out "$T/x1"
expect 2 'option early_stopping\.patience = 0: must be >= 1$' "patience 0 refused (its range)" \
  -- train "$T/reg.ini" --out "$T/x2" --set plugins.callbacks=early_stopping --set early_stopping.patience=0
expect 2 'option early_stopping\.min_delta = -0\.1: must be >= 0$' \
  "negative min_delta refused (its range)" \
  -- train "$T/reg.ini" --out "$T/x3" --set plugins.callbacks=early_stopping --set early_stopping.min_delta=-0.1
expect 2 'option monitor = test_loss: test metrics are logged after training ends' "a test_* monitor refused" \
  -- train "$T/reg.ini" --out "$T/x4" --set plugins.callbacks=early_stopping --set early_stopping.monitor=test_loss

# ---- checkpoint ----
# top NAME K [max]: the file names of the K best values of column NAME in
# the metrics.csv on stdin, sorted by name (ties: the earlier is kept).
top() {
  column "$1" /dev/stdin | awk '{ print $3, NR, $2, $1 }' |
    sort -k1,1g${3:+r} -k2,2n | head -n "$2" |
    awk '{ printf "epoch=%s-step=%s.ckpt\n", $3, $4 }' | sort
}
files() { ls "$1" | grep '^epoch=' | sort; }
train "$T/osc.ini" --out "$T/ck3" --set plugins.callbacks=checkpoint --set checkpoint.save_top_k=3
check "checkpoint save_top_k 3: the three best by val_loss (from metrics.csv)" \
  same "$(files "$T/ck3/checkpoints" | tr '\n' ' ')" "$(top val_loss 3 <"$T/osc/metrics.csv" | tr '\n' ' ')"
check "checkpoint: exactly 3 files, best.ckpt and last.ckpt" same "$(ls "$T/ck3/checkpoints" | wc -l | tr -d ' ')" 5
bestname=$(top val_loss 1 <"$T/osc/metrics.csv")
check "best.ckpt is a copy of the best ($bestname)" cmp -s "$T/ck3/checkpoints/best.ckpt" "$T/ck3/checkpoints/$bestname"
check "checkpoint leaves metrics.csv as it was" cmp -s "$T/osc/metrics.csv" "$T/ck3/metrics.csv"
train "$T/osc.ini" --out "$T/ckmax" --set plugins.callbacks=checkpoint --set checkpoint.save_top_k=2 \
  --set checkpoint.mode=max
check "checkpoint mode max: the two highest val_loss" \
  same "$(files "$T/ckmax/checkpoints" | tr '\n' ' ')" "$(top val_loss 2 max <"$T/osc/metrics.csv" | tr '\n' ' ')"
train "$T/osc.ini" --out "$T/ckall" --set plugins.callbacks=checkpoint --set checkpoint.save_top_k=-1
check "checkpoint save_top_k -1: one file per validation" same "$(files "$T/ckall/checkpoints" | wc -l | tr -d ' ')" 12
check "save_top_k -1: best.ckpt is the best" cmp -s "$T/ckall/checkpoints/best.ckpt" "$T/ckall/checkpoints/$bestname"
train "$T/osc.ini" --out "$T/ck0" --set plugins.callbacks=checkpoint --set checkpoint.save_top_k=0
check "checkpoint save_top_k 0: only last.ckpt" same "$(ls "$T/ck0/checkpoints")" last.ckpt

# best.ckpt holds the weights of its epoch: after 10 epochs the best is
# epoch 8, whose weights a 9-epoch run ends with.
train "$T/osc.ini" --out "$T/ck10" --set plugins.callbacks=checkpoint --set loop.max_epochs=10
train "$T/osc.ini" --out "$T/ep9" --set loop.max_epochs=9
check "after 10 epochs best.ckpt is epoch=8-step=36.ckpt" cmp -s "$T/ck10/checkpoints/best.ckpt" "$T/ck10/checkpoints/epoch=8-step=36.ckpt"
check "save_top_k 1: one file besides best.ckpt and last.ckpt" same "$(files "$T/ck10/checkpoints")" "epoch=8-step=36.ckpt"
check "dump of best.ckpt equals the weights after epoch 8" \
  sh -c "'$LOOPKIT' dump '$T/ck10/checkpoints/best.ckpt' >'$T/b.dump' && '$LOOPKIT' dump '$T/ep9/checkpoints/last.ckpt' | cmp -s - '$T/b.dump'"

# A checkpoint asked for at on_validation_end is written after the epoch's
# bookkeeping: resuming from it goes on with epoch 9 (no second validation
# of epoch 8) and ends where the uninterrupted run ended. best.ckpt is not
# ck10's latest checkpoint, so the resumed run writes a new directory,
# whose metrics.csv starts with ck10's rows up to the checkpoint.
train "$T/osc.ini" --out "$T/frombest" --resume "$T/ck10/checkpoints/best.ckpt" \
  --set plugins.callbacks=checkpoint --set loop.max_epochs=10
check "resumed from best.ckpt: one validation of epoch 9 after the checkpoint's 9, not two of epoch 8" \
  same "$(column val_loss "$T/frombest/metrics.csv" | awk '{ print $2 }' | tr '\n' ' ')" "0 1 2 3 4 5 6 7 8 9 "
check "resumed from best.ckpt: metrics.csv row for row the uninterrupted run's" \
  cmp -s "$T/ck10/metrics.csv" "$T/frombest/metrics.csv"
check "resumed from best.ckpt: ends with the uninterrupted run's weights" \
  sh -c "'$LOOPKIT' dump '$T/ck10/checkpoints/last.ckpt' >'$T/l10.dump' && '$LOOPKIT' dump '$T/frombest/checkpoints/last.ckpt' | cmp -s - '$T/l10.dump'"

# The kept list survives a resume: 6 epochs, then 6 more, in the same
# directory, end as the 12-epoch run did.
train "$T/osc.ini" --out "$T/ckres" --set plugins.callbacks=checkpoint --set checkpoint.save_top_k=3 \
  --set loop.max_epochs=6
check "checkpoint before the resume: 3 files" same "$(files "$T/ckres/checkpoints" | wc -l | tr -d ' ')" 3
train "$T/osc.ini" --resume "$T/ckres/checkpoints/last.ckpt" --set plugins.callbacks=checkpoint \
  --set checkpoint.save_top_k=3
check "checkpoint resumed: the same files as the uninterrupted run" \
  same "$(ls "$T/ckres/checkpoints" | tr '\n' ' ')" "$(ls "$T/ck3/checkpoints" | tr '\n' ' ')"
check "checkpoint resumed: best.ckpt byte for byte the uninterrupted run's" \
  cmp -s "$T/ck3/checkpoints/best.ckpt" "$T/ckres/checkpoints/best.ckpt"

# A training metric, checked at each epoch's end (one step per epoch).
train "$T/probe.ini" --out "$T/ckw" --set plugins.callbacks=checkpoint --set checkpoint.monitor=w0 \
  --set checkpoint.save_top_k=2
check "checkpoint on w0 (falling), mode min: the last two epochs" \
  same "$(files "$T/ckw/checkpoints" | tr '\n' ' ')" "epoch=8-step=9.ckpt epoch=9-step=10.ckpt "
# Non-finite values are never kept: loss is NaN at epoch 0 and falls after.
train "$T/probe.ini" --out "$T/cknan" --set plugins.callbacks=checkpoint --set checkpoint.monitor=loss \
  --set checkpoint.mode=max --set checkpoint.save_top_k=2 --set probe.nan_loss_at=0
check "checkpoint: a NaN is never kept, even with room in the top k" \
  same "$(files "$T/cknan/checkpoints" | tr '\n' ' ')" "epoch=1-step=2.ckpt epoch=2-step=3.ckpt "
expect 2 'option checkpoint\.save_top_k = -2: must be >= -1 and <= 100000$' "save_top_k -2 refused (its range)" \
  -- train "$T/osc.ini" --out "$T/x5" --set plugins.callbacks=checkpoint --set checkpoint.save_top_k=-2
expect 2 'option checkpoint\.save_top_k = 100001: must be >= -1 and <= 100000$' "save_top_k 100001 refused (its range)" \
  -- train "$T/osc.ini" --out "$T/x5b" --set plugins.callbacks=checkpoint --set checkpoint.save_top_k=100001

# ---- ema ----
config ema <<INI
[loop]
max_steps = 5
[plugins]
step = probe
optimizer = probe
callbacks = ema
[probe]
grad = 1
lr = 0.1
[ema]
decay = 0.5
INI
# w_t = w_{t-1} - 0.1, ema_t = 0.5 ema_{t-1} + 0.5 w_t, from ema_0 = w_0 = 1.
want=$(awk 'BEGIN { d = 0.5; w = 1; e = 1
  for (t = 1; t <= 5; t++) { w = w - 0.1 * 1; e = d * e + (1 - d) * w }
  printf "%.17g", e }')
train "$T/ema.ini" --out "$T/ema"
check "ema: after 5 steps the weights are the average of the formula ($want)" \
  same "$(value 'w[0]' "$T/ema/checkpoints/last.ckpt"):$(value 'w[1]' "$T/ema/checkpoints/last.ckpt")" "$want:$want"
train "$T/ema.ini" --out "$T/ema-raw" --set ema.apply_at_end=false
check "ema apply_at_end = false: the trained weights stay" \
  same "$(value 'w[0]' "$T/ema-raw/checkpoints/last.ckpt")" 0.50000000000000011
train "$T/ema.ini" --out "$T/ema-res" --set loop.max_steps=3 --set ema.apply_at_end=false
train "$T/ema.ini" --resume "$T/ema-res/checkpoints/last.ckpt"
check "ema resumed after 3 steps continues its average" \
  same "$(value 'w[0]' "$T/ema-res/checkpoints/last.ckpt")" "$want"
train "$T/ema.ini" --out "$T/ema0" --set ema.decay=0
plain ema
train "$T/ema-plain.ini" --out "$T/noema"
check "ema decay 0: the average is the weights" \
  sh -c "'$LOOPKIT' dump '$T/ema0/checkpoints/last.ckpt' >'$T/e0' && '$LOOPKIT' dump '$T/noema/checkpoints/last.ckpt' | cmp -s - '$T/e0'"
config ema32 <<INI
[loop]
max_steps = 20
[plugins]
step = rosenbrock
optimizer = sgd
callbacks = ema
[rosenbrock]
dtype = f32
[sgd]
lr = 0.001
[ema]
decay = 0
INI
train "$T/ema32.ini" --out "$T/e32"
plain ema32
train "$T/ema32-plain.ini" --out "$T/n32"
check "ema f32, decay 0: the weights" \
  sh -c "'$LOOPKIT' dump '$T/e32/checkpoints/last.ckpt' >'$T/e32.d' && '$LOOPKIT' dump '$T/n32/checkpoints/last.ckpt' | cmp -s - '$T/e32.d'"
train "$T/ema32.ini" --out "$T/h32" --set ema.decay=0.9
check "ema f32, decay 0.9: x[0] moved less than the weights did" \
  awk -v e="$(value 'x[0]' "$T/h32/checkpoints/last.ckpt")" -v w="$(value 'x[0]' "$T/n32/checkpoints/last.ckpt")" \
  'BEGIN { exit !(e > -1.2 && e < w) }'

# Validation sees the averages. linreg learns with probe's optimizer (its lr
# is an option, not state); A averages with decay 0.5 for one epoch, so its
# val_loss is that of the averages, which apply_at_end leaves as weights.
# B resumes A with lr 0 and decay 0: it validates exactly those weights.
config emaval <<INI
[loop]
max_epochs = 1
[plugins]
step = linreg
optimizer = probe
data = synthetic
callbacks = ema
[synthetic]
n_test = 0
[probe]
lr = 0.05
[ema]
decay = 0.5
INI
train "$T/emaval.ini" --out "$T/va"
plain emaval
train "$T/emaval-plain.ini" --out "$T/vc"
train "$T/emaval.ini" --out "$T/vd" --set ema.decay=0
va=$(column val_loss "$T/va/metrics.csv" | awk '{ print $3 }')
check "ema decay 0: val_loss of the weights" \
  same "$(column val_loss "$T/vd/metrics.csv")" "$(column val_loss "$T/vc/metrics.csv")"
check "ema decay 0.5: val_loss differs from the weights'" \
  sh -c "[ '$va' != '$(column val_loss "$T/vc/metrics.csv" | awk '{ print $3 }')' ]"
train "$T/emaval.ini" --resume "$T/va/checkpoints/last.ckpt" --set loop.max_epochs=2 \
  --set probe.lr=0 --set ema.decay=0
check "ema: the val_loss of epoch 0 was that of the averaged weights" \
  same "$(column val_loss "$T/va/metrics.csv" | awk '$2 == 1 { print $3 }')" "$va"

# A checkpoint written during validation (checkpoint listed before ema)
# holds the averages as weights; a run resumed from it swaps them back and
# trains on as the uninterrupted run did.
config swap <<INI
[loop]
max_epochs = 4
[plugins]
step = linreg
optimizer = sgd
data = synthetic
callbacks = checkpoint,ema
[synthetic]
n_test = 0
[sgd]
lr = 0.1
[ema]
decay = 0.5
apply_at_end = false
[checkpoint]
save_top_k = -1
INI
train "$T/swap.ini" --out "$T/sw"
train "$T/swap.ini" --resume "$T/sw/checkpoints/epoch=1-step=16.ckpt" --out "$T/sw2"
check "ema: resumed from a checkpoint written during validation, the same weights at the end" \
  sh -c "'$LOOPKIT' dump '$T/sw/checkpoints/last.ckpt' >'$T/sw.d' && '$LOOPKIT' dump '$T/sw2/checkpoints/last.ckpt' | cmp -s - '$T/sw.d'"
expect 2 'option ema\.decay = 1: must be >= 0 and < 1$' "ema decay 1 refused (its range)" \
  -- train "$T/ema.ini" --out "$T/x6" --set ema.decay=1
expect 2 'option ema\.decay = -0\.1: must be >= 0 and < 1$' "ema negative decay refused (its range)" \
  -- train "$T/ema.ini" --out "$T/x7" --set ema.decay=-0.1

# ---- lr_monitor ----
config lrm <<INI
[loop]
max_epochs = 3
[plugins]
step = linreg
optimizer = sgd
data = synthetic
callbacks = lr_monitor
[synthetic]
n_train = 24
[sgd]
lr = 0.1
INI
train "$T/lrm.ini" --out "$T/lrm"
check "lr_monitor: an lr column with 0.1 on each of the 9 step rows" \
  same "$(column lr "$T/lrm/metrics.csv" | awk '{ print $3 }' | sort | uniq -c | tr -s ' ')" " 9 0.10000000000000001"
check "lr_monitor: lr on exactly the rows with a loss" \
  same "$(rows lr "$T/lrm/metrics.csv")" "$(rows loss "$T/lrm/metrics.csv")"
train "$T/lrm.ini" --out "$T/lrm-ep" --set lr_monitor.logging_interval=epoch
check "lr_monitor logging_interval epoch: on the first step row of each epoch" \
  same "$(column lr "$T/lrm-ep/metrics.csv" | tr '\n' ' ')" \
  "0 0 0.10000000000000001 3 1 0.10000000000000001 6 2 0.10000000000000001 "
plain lrm
for interval in epoch step; do
  train "$T/lrm.ini" --out "$T/sch-$interval" --set plugins.scheduler=step_lr --set step_lr.step_size=1 \
    --set step_lr.gamma=0.5 --set step_lr.interval=$interval
  train "$T/lrm-plain.ini" --out "$T/sch-$interval-none" --set plugins.scheduler=step_lr \
    --set step_lr.step_size=1 --set step_lr.gamma=0.5 --set step_lr.interval=$interval
  check "lr_monitor with a scheduler ($interval): one lr column, the scheduler's values" \
    cmp -s "$T/sch-$interval/metrics.csv" "$T/sch-$interval-none/metrics.csv"
done
check "lr_monitor with a scheduler: lr falls (0.1, 0.05, 0.025 by epoch)" \
  same "$(column lr "$T/sch-epoch/metrics.csv" | awk '{ print $3 }' | uniq | tr '\n' ' ')" \
  "0.10000000000000001 0.050000000000000003 0.025000000000000001 "
config lrm-nodata <<INI
[loop]
max_steps = 4
[plugins]
step = rosenbrock
optimizer = sgd
callbacks = lr_monitor
[sgd]
lr = 0.001
[lr_monitor]
logging_interval = epoch
INI
train "$T/lrm-nodata.ini" --out "$T/lrm-nd"
check "lr_monitor epoch without data: the first row only" \
  same "$(column lr "$T/lrm-nd/metrics.csv" | tr '\n' ' ')" "0 0 0.001 "
expect 2 'lr_monitor .*failed to start: the run.s optimizer has no learning rate' \
  "lr_monitor refuses an optimizer without a learning rate" \
  -- train "$T/lrm.ini" --out "$T/x8" --set plugins.optimizer=probe
finish

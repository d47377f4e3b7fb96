#!/bin/sh
# What a Lightning user expects of the loop's budget and the schedules
# that follow it: max_steps alone bounds a run (max_epochs unlimited when
# only max_steps is given); schedule lengths given as auto are the run's.
. "$LK_SRCDIR/tests/cli/lib.sh"
cd "$T" || exit 1

train() { "$LOOPKIT" train "$@" --quiet >"$T/train.out" 2>&1; }
# rows DIR: metrics.csv's training rows (a loss and no val_ or test_ cell).
steps() { awk -F, 'NR > 1 && $3 != ""' "$1/metrics.csv" | wc -l | tr -d ' '; }
same() {
  [ "$1" = "$2" ] && return 0
  echo "# got [$1], expected [$2]"
  return 1
}

# ---- 1. a step budget means what it says ----

# One batch an epoch: 8 samples in batches of 8.
config budget <<INI
[loop]
max_steps = 20
[plugins]
step = linreg
optimizer = sgd
data = synthetic
[synthetic]
n_train = 8
n_val = 0
n_test = 0
batch_size = 8
[sgd]
lr = 0.05
INI
expect 0 'trained 20 steps \(20 epochs\)' \
  "max_steps = 20 alone, one batch an epoch: 20 steps (max_epochs unlimited)" \
  -- train "$T/budget.ini" --out "$T/b1"
check "... 20 rows in metrics.csv" same "$(steps "$T/b1")" 20
check "... and config.ini records max_epochs = -1 (no limit)" \
  grep -qx 'max_epochs = -1' "$T/b1/config.ini"
expect 0 'trained 20 steps \(20 epochs\)' "... which reruns the same from config.ini" \
  -- train "$T/b1/config.ini" --out "$T/b1-again"
check "... to the same bits" cmp -s "$T/b1/checkpoints/last.ckpt" "$T/b1-again/checkpoints/last.ckpt"
expect 0 'trained 3 steps \(3 epochs\)' \
  "max_epochs given explicitly keeps its meaning: the first limit reached stops the run" \
  -- train "$T/budget.ini" --out "$T/b2" --set loop.max_epochs=3
expect 0 'trained 1 steps? \(1 epoch\)' "neither given: one epoch, as before" \
  -- train "$T/budget.ini" --out "$T/b3" --set loop.max_steps=-1
check "... and config.ini records max_epochs = 1" grep -qx 'max_epochs = 1' "$T/b3/config.ini"
expect 0 'trained 20 steps \(20 epochs\)' "max_epochs = -1 given: no limit either" \
  -- train "$T/budget.ini" --out "$T/b4" --set loop.max_epochs=-1
expect 2 'loop.max_epochs = "0": expected an integer -1 \(no limit\) or >= 1' \
  "max_epochs = 0 is refused, naming what it accepts" \
  -- train "$T/budget.ini" --out "$T/b5" --set loop.max_epochs=0

finish

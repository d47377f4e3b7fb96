#!/bin/sh
# What callbacks keep (lk_host_keep_checkpoints, src/loop/ckpt_policy.c):
# a callback that declares it keeps best.ckpt is the one [loop] test_ckpt =
# best tests, in the directory it names, whatever its options are called;
# two that keep theirs in one directory are refused; one that declares
# nothing, and has none of the bundled checkpoint's options, keeps nothing.
. "$LK_SRCDIR/tests/cli/lib.sh"

cat >"$T/k.ini" <<INI
[loop]
max_epochs = 2
test_ckpt = best
[plugins]
step = linreg
optimizer = sgd
data = synthetic
callbacks = keeper
[synthetic]
n_train = 8
n_val = 4
n_test = 4
batch_size = 4
[sgd]
lr = 0.001
INI
expect 0 'trained' "test_ckpt = best with a callback that declares best.ckpt" -- \
  train "$T/k.ini" --out "$T/k" --quiet
check "... which wrote it in checkpoints/" test -s "$T/k/checkpoints/best.ckpt"
check "... and the test ran" grep -q test_loss "$T/k/metrics.csv"
expect 0 'trained' "... in the directory it declares, relative to the run directory" -- \
  train "$T/k.ini" --out "$T/kd" --quiet --set keeper.dir=mine
check "... which holds best.ckpt" test -s "$T/kd/mine/best.ckpt"
expect 2 'loop.test_ckpt = best needs a checkpoint callback' \
  "a callback that declares nothing is no checkpoint callback" -- \
  train "$T/k.ini" --out "$T/kn" --set keeper.declare=false
expect 2 'loop.test_ckpt = best needs a checkpoint callback' \
  "... nor one that declares it keeps no best.ckpt" -- \
  train "$T/k.ini" --out "$T/kb" --set keeper.best=false
expect 2 'callbacks a and b both keep their checkpoints in mine' \
  "two that declare one directory are refused" -- \
  train "$T/k.ini" --out "$T/k2" --set plugins.callbacks=a:keeper,b:keeper \
  --set a.dir=mine --set b.dir=./mine/
expect 2 'both keep their checkpoints in checkpoints' \
  "... and so are one and the bundled checkpoint in checkpoints/" -- \
  train "$T/k.ini" --out "$T/k3" --set plugins.callbacks=keeper,checkpoint
finish

#!/bin/sh
# sequential's loss option (loopkit.ini(5)): regression nets trained with
# mse from csv and npy float targets, metrics mse and mae in metrics.csv
# and tensorboard's events; bce_with_logits on a binary task with its acc;
# the options of each loss reach it; the errors (a target of the wrong
# dtype or shape, an option of another loss, an unknown loss) exit 2
# naming both sides, before any run directory is made. The values and
# gradients themselves are tests/test_losses.c's, against torch.
. "$LK_SRCDIR/tests/cli/lib.sh"
cd "$T" || exit 1 # errors must leave no runs/ here
D=$LK_SRCDIR/tests/data/npy
train() { "$LOOPKIT" train "$@" --quiet >"$T/train.out" 2>&1; }
# col CSV NAME ROW: the value of column NAME in row ROW (1: the first after
# the header; $: the last row that has it).
col() {
  awk -F, -v k="$2" -v r="$3" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == k) c = i; next }
    c && $c != "" { n++; v = $c; if (r != "$" && n == r) { print v; exit } }
    END { if (r == "$") print v }' "$1"
}
# below A B: A < B, numerically
below() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 < b + 0) }'; }

# ---- 1. regression with mse, from npy float targets ----------------------
config npy <<INI
[loop]
max_epochs = 20
seed = 1
[plugins]
step = sequential
optimizer = sgd
data = npy
loggers = tensorboard
[npy]
x = $D/reg_x.npy
y = $D/reg_y.npy
val_split = 0.25
batch_size = 8
[sequential]
layers = linear(8), tanh, linear(1)
loss = mse
[sgd]
lr = 0.05
INI
check "mse trains a regression net on npy f32 targets" train "$T/npy.ini" --out "$T/npy"
check "metrics.csv has the columns mse, mae, val_mse and val_mae" \
  grep -q '^step,epoch,loss,mse,mae,val_loss,val_mse,val_mae' "$T/npy/metrics.csv"
first=$(col "$T/npy/metrics.csv" mse 1) last=$(col "$T/npy/metrics.csv" val_mse '$')
check "... and the validation mse ends below a tenth of the first ($first, $last)" \
  below "$last" "$(awk -v a="$first" 'BEGIN { print a / 10 }')"
check "with loss = mse, mse is the loss" \
  test "$(col "$T/npy/metrics.csv" mse 5)" = "$(col "$T/npy/metrics.csv" loss 5)"
check "mae is another number" \
  test "$(col "$T/npy/metrics.csv" mae 5)" != "$(col "$T/npy/metrics.csv" loss 5)"
check "no acc for a regression" sh -c "! head -1 '$T/npy/metrics.csv' | grep -q acc"
if /usr/bin/python3 -c 1 2>/dev/null; then
  /usr/bin/python3 "$LK_SRCDIR/tests/cli/tfevents.py" "$T"/npy/events.out.tfevents.* >"$T/events" 2>&1
  check "tensorboard logs mse and mae too" sh -c "
    grep -q '^scalar .* val_mse ' '$T/events' && grep -q '^scalar .* val_mae ' '$T/events'"
fi
for l in l1 smooth_l1 huber; do
  check "loss = $l trains the same net" train "$T/npy.ini" --out "$T/$l" --set sequential.loss=$l
  check "... to another loss than mse's, with mse and mae" sh -c "
    grep -q '^step,epoch,loss,mse,mae,' '$T/$l/metrics.csv' &&
    test \"\$(sed -n 3p '$T/$l/metrics.csv')\" != \"\$(sed -n 3p '$T/npy/metrics.csv')\""
done
check "smooth_l1's beta reaches it" train "$T/npy.ini" --out "$T/beta" \
  --set sequential.loss=smooth_l1 --set sequential.beta=0.25
check "... a loss other than beta = 1's" sh -c "! cmp -s '$T/beta/metrics.csv' '$T/smooth_l1/metrics.csv'"
check "huber's delta reaches it" train "$T/npy.ini" --out "$T/delta" \
  --set sequential.loss=huber --set sequential.delta=0.25
check "... a loss other than delta = 1's" sh -c "! cmp -s '$T/delta/metrics.csv' '$T/huber/metrics.csv'"
check "two targets a sample, [2], for an output [2]" train "$T/npy.ini" --out "$T/two" \
  --set "npy.y=$D/reg_y2.npy" --set 'sequential.layers=linear(8), tanh, linear(2)'
check "the same run twice: the same bits" sh -c "
  '$LOOPKIT' train '$T/npy.ini' --quiet --out '$T/npy2' >/dev/null 2>&1 &&
  cmp -s '$T/npy/metrics.csv' '$T/npy2/metrics.csv'"

# ---- 2. regression from a csv's float target column ----------------------
awk 'BEGIN { OFS = ","; print "a,b,y"; srand(3)
  for (i = 0; i < 64; i++) { a = rand() * 2 - 1; b = rand() * 2 - 1; print a, b, 2 * a - b + 0.5 } }' >reg.csv
config csv <<INI
[loop]
max_epochs = 30
seed = 1
[plugins]
step = sequential
optimizer = sgd
data = csv
[csv]
path = $T/reg.csv
header = true
labels = float
val_split = 0.25
batch_size = 8
[sequential]
layers = linear(1)
loss = mse
[sgd]
lr = 0.1
INI
check "mse trains a linear regression on a csv's f32 target column" train "$T/csv.ini" --out "$T/csv"
check "... with mse and mae columns" grep -q '^step,epoch,loss,mse,mae,' "$T/csv/metrics.csv"
check "... to a validation mse below 1e-4" below "$(col "$T/csv/metrics.csv" val_mse '$')" 1e-4
check "... and the weights 2, -1 and the bias 0.5" sh -c "
  '$LOOPKIT' dump '$T/csv/checkpoints/last.ckpt' | awk '
    \$1 == \"0.weight[0]\" { a = \$2 } \$1 == \"0.weight[1]\" { b = \$2 } \$1 == \"0.bias[0]\" { c = \$2 }
    END { d = (a - 2) ^ 2 + (b + 1) ^ 2 + (c - 0.5) ^ 2; exit !(d < 1e-4) }'"
check "loopkit predict writes the regression's outputs (no softmax)" sh -c "
  '$LOOPKIT' predict '$T/csv.ini' --ckpt '$T/csv/checkpoints/last.ckpt' --set 'csv.test=$T/reg.csv' -o '$T/pred.csv' >/dev/null 2>&1 &&
  head -1 '$T/pred.csv' | grep -qx 'index,y0'"

# ---- 3. bce_with_logits on a binary task ---------------------------------
awk 'BEGIN { OFS = ","; print "a,b,y"; srand(5)
  for (i = 0; i < 128; i++) { a = rand() * 2 - 1; b = rand() * 2 - 1; print a, b, (a + b > 0) ? 1 : 0 } }' >bin.csv
config bce <<INI
[loop]
max_epochs = 20
seed = 1
[plugins]
step = sequential
optimizer = sgd
data = csv
[csv]
path = $T/bin.csv
header = true
labels = float
val_split = 0.25
batch_size = 16
[sequential]
layers = linear(1)
loss = bce_with_logits
[sgd]
lr = 0.5
INI
check "bce_with_logits trains a binary classifier on f32 0/1 targets" train "$T/bce.ini" --out "$T/bce"
check "... with acc (the logits thresholded at 0), not mse" sh -c "
  head -1 '$T/bce/metrics.csv' | grep -q '^step,epoch,loss,acc,val_loss,val_acc'"
check "... to a validation accuracy of at least 0.9" below 0.9 "$(col "$T/bce/metrics.csv" val_acc '$')"
check "pos_weight reaches it" train "$T/bce.ini" --out "$T/pw" --set sequential.pos_weight=3
check "... another loss than without" sh -c "! cmp -s '$T/bce/metrics.csv' '$T/pw/metrics.csv'"

# ---- 4. cross_entropy's options, through the plugin ---------------------
config iris <<INI
[loop]
max_epochs = 2
seed = 1
[plugins]
step = sequential
optimizer = sgd
data = csv
[csv]
path = $LK_SRCDIR/tests/data/sklearn-iris.csv
header = true
batch_size = 16
[sequential]
layers = linear(3)
[sgd]
lr = 0.1
INI
check "cross_entropy, the default" train "$T/iris.ini" --out "$T/ce"
check "... and loss = cross_entropy said: the same bits" sh -c "
  '$LOOPKIT' train '$T/iris.ini' --quiet --out '$T/ce2' --set sequential.loss=cross_entropy >/dev/null 2>&1 &&
  cmp -s '$T/ce/metrics.csv' '$T/ce2/metrics.csv'"
check "label_smoothing changes the loss" sh -c "
  '$LOOPKIT' train '$T/iris.ini' --quiet --out '$T/ls' --set sequential.label_smoothing=0.1 >/dev/null 2>&1 &&
  ! cmp -s '$T/ce/metrics.csv' '$T/ls/metrics.csv'"
check "class weights change it" sh -c "
  '$LOOPKIT' train '$T/iris.ini' --quiet --out '$T/w' --set sequential.weight=1,2,3 >/dev/null 2>&1 &&
  ! cmp -s '$T/ce/metrics.csv' '$T/w/metrics.csv'"
check "nll with class weights trains and reports acc" sh -c "
  '$LOOPKIT' train '$T/iris.ini' --quiet --out '$T/nll' --set sequential.loss=nll --set sequential.weight=1,1,2 >/dev/null 2>&1 &&
  head -1 '$T/nll/metrics.csv' | grep -q '^step,epoch,loss,acc'"

# ---- 5. errors: exit 2, both sides named, nothing made -------------------
mkdir err && cd err || exit 1
expect 2 "loss = mse takes f32 targets .* f32 \[1\] a sample, but the data's targets are i32 \[\] \(class labels" \
  "class labels for mse: an error naming both" -- train "$T/iris.ini" --set sequential.loss=mse --set 'sequential.layers=linear(1)'
expect 2 "loss = bce_with_logits takes f32 targets .* f32 \[3\] a sample, but the data's targets are i32" \
  "class labels for bce_with_logits: the same" -- train "$T/iris.ini" --set sequential.loss=bce_with_logits
expect 2 "loss = mse takes f32 targets of the network's output shape, f32 \[1\] a sample, but the data's targets are f32 \[2\]" \
  "targets [2] for an output [1]: an error naming both shapes" -- train "$T/npy.ini" --set "npy.y=$D/reg_y2.npy"
expect 2 "loss = cross_entropy takes class labels, i32.*not class labels: f32 \[\]" \
  "f32 targets for cross_entropy: an error naming both" -- train "$T/csv.ini" --set sequential.loss=cross_entropy
expect 2 "sequential.beta=0.5: beta is an option of loss = smooth_l1, not of loss = mse \(.*csv.ini:[0-9]+\)" \
  "beta with mse: an error naming both" -- train "$T/csv.ini" --set sequential.beta=0.5
expect 2 "label_smoothing is an option of loss = cross_entropy, not of loss = nll" \
  "label_smoothing with nll (torch's nll_loss has none)" -- train "$T/iris.ini" --set sequential.loss=nll --set sequential.label_smoothing=0.1
expect 2 "weight is an option of loss = cross_entropy or nll, not of loss = huber" \
  "weight with huber" -- train "$T/csv.ini" --set sequential.loss=huber --set sequential.weight=1
expect 2 "pos_weight is an option of loss = bce_with_logits, not of loss = cross_entropy" \
  "pos_weight with cross_entropy" -- train "$T/iris.ini" --set sequential.pos_weight=2
expect 2 "delta is an option of loss = huber, not of loss = smooth_l1" \
  "delta with smooth_l1" -- train "$T/csv.ini" --set sequential.loss=smooth_l1 --set sequential.delta=2
expect 2 "sequential.loss: expected one of cross_entropy\|mse\|l1\|smooth_l1\|huber\|bce_with_logits\|nll, got \"hinge\"" \
  "an unknown loss: an error listing the valid ones" -- train "$T/csv.ini" --set sequential.loss=hinge
expect 2 "weight has 2 values, but the network has 3 classes" \
  "class weights of the wrong length" -- train "$T/iris.ini" --set sequential.weight=1,2
expect 2 "pos_weight has 2 values, but the network's output is f32 \[1\]" \
  "pos_weight of the wrong length" -- train "$T/bce.ini" --set sequential.pos_weight=1,2
expect 2 "top_k and f1 score classes, but loss = mse takes f32 targets" \
  "f1 with a regression" -- train "$T/csv.ini" --set sequential.f1=true
check "nothing refused left a run directory" test ! -e runs
cd "$T" || exit 1
check "a run's effective config.ini (every loss option's default in it) runs again" sh -c "
  grep -q '^beta = 1' '$T/csv/config.ini' &&
  '$LOOPKIT' train '$T/csv/config.ini' --quiet --out '$T/again' >/dev/null 2>&1 &&
  cmp -s '$T/csv/metrics.csv' '$T/again/metrics.csv'"
check "... and so does loopkit predict with it" sh -c "
  '$LOOPKIT' predict '$T/npy/config.ini' --ckpt '$T/npy/checkpoints/last.ckpt' -o '$T/pred2.csv' \
    --set 'npy.test_x=$D/reg_x.npy' --set 'npy.test_y=$D/reg_y.npy' >/dev/null 2>&1 &&
  head -1 '$T/pred2.csv' | grep -qx 'index,y0'"
finish

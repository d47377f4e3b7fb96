#!/bin/sh
# Module buffers go out and in (issue 25 item 6): batch norm's
# running_mean, running_var and num_batches_tracked exported by torch's
# names (num_batches_tracked I64) and read by init, strictly. The torch
# side is committed (tests/torch/bn_roundtrip_reference.py wrote
# tests/data/buffers): torch's state_dict() of the net as the init, and
# torch's eval-mode predictions from loopkit's export of the run below.
. "$LK_SRCDIR/tests/cli/lib.sh"
cd "$T" || exit 1
SEQ="$LK_SRCDIR/tests/data/sequential"
REF="$LK_SRCDIR/tests/data/buffers"
ST="python3 $LK_SRCDIR/tests/cli/st_tool.py"
train() { "$LOOPKIT" train "$@" --quiet >"$T/train.out" 2>&1; }
# stats CKPT: batch norm's buffers in CKPT, NAME[I] VALUE a line.
stats() { python3 "$LK_SRCDIR/tests/cli/ckpt_edit.py" "$1" --dump | grep -E 'running_|num_batches'; }

config bn <<INI
[loop]
max_epochs = 1
[plugins]
step = sequential
optimizer = sgd
data = idx
[idx]
dir = $SEQ
batch_size = 4
shuffle = false
normalize = scale
[sequential]
layers = conv2d(4, 3, padding=1), batchnorm2d, relu, maxpool2d(2), flatten, linear(8), batchnorm1d, relu, linear(3)
init = $REF/init.safetensors
[sgd]
lr = 0.1
INI

# ---- torch's full state_dict() as init, strictly -------------------------
check "init from torch's full state_dict() (parameters and buffers) trains" \
  train "$T/bn.ini" --out "$T/run"
CK="$T/run/checkpoints/last.ckpt"
check "init read the buffers: num_batches_tracked counts on from torch's 5" \
  sh -c "python3 '$LK_SRCDIR/tests/cli/ckpt_edit.py' '$CK' --dump | grep -qx 'sequential.1.num_batches_tracked.0. 7'"
expect 2 "unexpected.safetensors: tensor \"9.weight\" is no parameter of plugin sequential" \
  "init: a key the net does not have is refused, named" \
  -- train "$T/bn.ini" --set sequential.init="$REF/unexpected.safetensors" --out "$T/x1"
expect 2 "missing.safetensors has no tensor \"1.running_var\" \(a buffer of plugin sequential" \
  "init: a buffer the file lacks is refused, named" \
  -- train "$T/bn.ini" --set sequential.init="$REF/missing.safetensors" --out "$T/x2"
check "nothing refused left a run directory" test ! -e "$T/x1" -a ! -e "$T/x2"

# ---- export: the buffers by torch's names, torch predicts as loopkit -----
expect 0 'wrote ' "export a batch-norm net" -- export "$CK" -o "$T/out.safetensors"
$ST tensors "$T/out.safetensors" | cut -d' ' -f1-3 | grep -v weight | grep -v bias >"$T/buffers.txt"
printf '%s\n' "1.num_batches_tracked I64 -" "1.running_mean F32 4" "1.running_var F32 4" \
  "6.num_batches_tracked I64 -" "6.running_mean F32 8" "6.running_var F32 8" >"$T/buffers.want"
check "export: running_mean, running_var (F32) and num_batches_tracked (I64) by torch's names" \
  cmp -s "$T/buffers.txt" "$T/buffers.want"
"$LOOPKIT" predict "$T/bn.ini" --ckpt "$CK" >"$T/mine.csv" 2>"$T/predict.err"
# same A B: every field equal to 1e-5 (the header and indices exactly).
same() {
  awk -F, 'NR == FNR { for (i = 1; i <= NF; i++) v[FNR, i] = $i; n = FNR; next }
    { for (i = 1; i <= NF; i++) {
        a = v[FNR, i]; b = $i
        if (FNR == 1 || i <= 2) { if (a != b) bad = 1 }
        else { d = a - b; if (d < 0) d = -d; if (d > 1e-5) bad = 1 } }
      m = FNR }
    END { exit bad || m != n || n < 2 }' "$1" "$2"
}
check "torch's eval-mode predictions from loopkit's export equal loopkit predict's (1e-5)" \
  same "$REF/predictions.csv" "$T/mine.csv"
expect 0 'wrote ' "export CONFIG --ckpt CKPT: a checkpoint outside its run" \
  -- export "$T/bn.ini" --ckpt "$CK" -o "$T/out2.safetensors"
check "... the same file" cmp -s "$T/out.safetensors" "$T/out2.safetensors"

# ---- round trip: export, init from it, the statistics bit for bit -------
# momentum = 0 keeps the running statistics as init set them (torch's
# update (1 - 0) * running + 0 * batch); the counts go on by two batches.
check "init from loopkit's export" \
  train "$T/bn.ini" --set sequential.init="$T/out.safetensors" --out "$T/back" \
  --set "sequential.layers=conv2d(4, 3, padding=1), batchnorm2d(momentum=0), relu, maxpool2d(2), flatten, linear(8), batchnorm1d(momentum=0), relu, linear(3)"
stats "$CK" | sed 's/num_batches_tracked\[0\] 7$/num_batches_tracked[0] 9/' >"$T/run.stats"
stats "$T/back/checkpoints/last.ckpt" >"$T/back.stats"
check "round trip: running_mean and running_var bit for bit, num_batches_tracked read (7, then 9)" \
  cmp -s "$T/run.stats" "$T/back.stats"
check "... 26 values" test "$(wc -l <"$T/run.stats")" -eq 26
finish

#!/bin/sh
# Weights in and out as safetensors: mlp's init from a file
# (lk_host_load_params), loopkit export, round trips, torch's own file and
# loss (tests/torch/safetensors_reference.py wrote them), and every lie a
# file can tell, each refused with exit 2 naming the file and the tensor.
. "$LK_SRCDIR/tests/cli/lib.sh"
cd "$T" || exit 1
ST="python3 $LK_SRCDIR/tests/cli/st_tool.py"
DATA="$LK_SRCDIR/tests/data"
if ! python3 -c 'import json, hashlib' 2>/dev/null; then
  echo "1..0 # SKIP no python3"
  exit 0
fi

# A 4-8-3 classifier on 16 fixed samples, one batch of all of them.
config mlp <<INI
[loop]
max_steps = 1
[plugins]
step = mlp
optimizer = sgd
data = csv
[csv]
path = $DATA/st_mlp.csv
batch_size = 16
shuffle = false
[mlp]
layers = 4,8,3
[sgd]
lr = 0
INI
W0=layer0.weight:F32:8x4:ramp
B0=layer0.bias:F32:8:ramp
W1=layer1.weight:F32:3x8:ramp
B1=layer1.bias:F32:3:ramp

# ---- init from a file --------------------------------------------------
$ST write "$T/ramp.safetensors" "$W0" "$B0" "$W1" "$B1"
expect 0 'trained 1 steps' "mlp init from a .safetensors file" \
  -- train "$T/mlp.ini" --set mlp.init="$T/ramp.safetensors" --out "$T/r1" --quiet
# Element i of the ramp is ((37 i) mod 101 - 50) / 64: [5] = 0.53125,
# [2] = 0.375.
check "init: layer0.weight[5] is the file's 0.53125" \
  test "$(value 'layer0.weight[5]' "$T/r1/checkpoints/last.ckpt")" = 0.53125
check "init: layer1.bias[2] is the file's 0.375" \
  test "$(value 'layer1.bias[2]' "$T/r1/checkpoints/last.ckpt")" = 0.375
# F64 converts to the f32 parameters; the order of the tensors in the file
# is free.
$ST write "$T/f64.safetensors" layer1.bias:F64:3:0.1 "$W1" \
  layer0.weight:F64:8x4:ramp "$B0"
expect 0 'trained 1 steps' "init: F64 tensors convert to f32 parameters" \
  -- train "$T/mlp.ini" --set mlp.init="$T/f64.safetensors" --out "$T/r2" --quiet
check "init: F64 0.1 becomes f32 0.100000001" \
  test "$(value 'layer1.bias[0]' "$T/r2/checkpoints/last.ckpt")" = 0.100000001
check "init: F64 and F32 files of the same values give the same weights" \
  test "$(value 'layer0.weight[9]' "$T/r2/checkpoints/last.ckpt")" = \
  "$(value 'layer0.weight[9]' "$T/r1/checkpoints/last.ckpt")"

# ---- what init refuses: names, shapes, dtypes, values ------------------
$ST write "$T/missing.safetensors" "$W0" "$B0" "$W1"
expect 2 "mlp: $T/missing.safetensors has no tensor \"layer1.bias\"" \
  "init: a parameter missing from the file is named" \
  -- train "$T/mlp.ini" --set mlp.init="$T/missing.safetensors" --out "$T/bad1" --quiet
$ST write "$T/extra.safetensors" "$W0" "$B0" "$W1" "$B1" lm_head.weight:F32:3x8:0
expect 2 "$T/extra.safetensors: tensor \"lm_head.weight\" is no parameter of plugin mlp" \
  "init: a tensor of the file that is no parameter is named" \
  -- train "$T/mlp.ini" --set mlp.init="$T/extra.safetensors" --out "$T/bad2" --quiet
$ST write "$T/shape.safetensors" layer0.weight:F32:4x8:ramp "$B0" "$W1" "$B1"
expect 2 "$T/shape.safetensors: tensor \"layer0.weight\" has shape \[4, 8\], parameter layer0.weight of plugin mlp has shape \[8, 4\]" \
  "init: a misshapen tensor names both shapes" \
  -- train "$T/mlp.ini" --set mlp.init="$T/shape.safetensors" --out "$T/bad3" --quiet
$ST write "$T/bf16.safetensors" "$W0" layer0.bias:BF16:8:0 "$W1" "$B1"
expect 2 "$T/bf16.safetensors: tensor \"layer0.bias\" is BF16: only F32 and F64 convert" \
  "init: a dtype that does not convert is named" \
  -- train "$T/mlp.ini" --set mlp.init="$T/bf16.safetensors" --out "$T/bad4" --quiet
$ST write "$T/nan.safetensors" "$W0" "$B0" "$W1" layer1.bias:F32:3:nan
expect 2 "$T/nan.safetensors: tensor \"layer1.bias\"\[0\] is nan: parameters must be finite" \
  "init: a non-finite value is refused" \
  -- train "$T/mlp.ini" --set mlp.init="$T/nan.safetensors" --out "$T/bad5" --quiet
$ST write "$T/big.safetensors" "$W0" "$B0" "$W1" layer1.bias:F64:3:1e300
expect 2 "tensor \"layer1.bias\"\[0\] = 1e\+300 is beyond the range of parameter layer1.bias \(f32\)" \
  "init: an F64 beyond f32's range is refused" \
  -- train "$T/mlp.ini" --set mlp.init="$T/big.safetensors" --out "$T/bad6" --quiet
expect 2 "cannot open safetensors file $T/none.safetensors" "init: a missing file" \
  -- train "$T/mlp.ini" --set mlp.init="$T/none.safetensors" --out "$T/bad7" --quiet

# ---- lying headers: each names the file, the tensor and the field ------
lie() { # lie HOW PATTERN DESC
  $ST lie "$T/ramp.safetensors" "$T/lie-$1.safetensors" "$1"
  expect 2 "$T/lie-$1.safetensors: $2" "init: $3" \
    -- train "$T/mlp.ini" --set mlp.init="$T/lie-$1.safetensors" --out "$T/lie-$1" --quiet
}
lie oob 'tensor "layer1.bias": data_offsets \[[0-9]+, [0-9]+\] go past the end of the data buffer' \
  "offsets out of bounds"
lie size 'tensor "layer1.bias": data_offsets \[[0-9]+, [0-9]+\] hold 12 bytes, but shape \[4\] of F32 needs 16' \
  "a size that is not dtype * shape"
lie dtype 'tensor "layer1.bias": dtype "F31" is not a dtype this reader knows' "an unknown dtype"
lie overlap 'tensor "layer1.bias": data_offsets \[[0-9]+, [0-9]+\] overlap tensor "layer1.weight"' \
  "overlapping tensors"
lie hole 'tensor "layer1.bias": data_offsets \[[0-9]+, [0-9]+\] leave a hole' "a hole in the data"
lie truncate 'tensor "layer1.bias": data_offsets \[[0-9]+, [0-9]+\] go past the end of the data buffer \([0-9]+ bytes: the file is truncated' \
  "a truncated file"
lie dup 'tensor "layer0.weight": the name appears twice in the header' "duplicate names"
check "no run directory for any refused init" sh -c "! ls -d '$T'/bad* '$T'/lie-*/ 2>/dev/null"

# ---- whose parameters: the plugin that calls it, by name ---------------
# probe (a test plugin) as zero_grad has a parameter w beside mlp's.
sed 's/^optimizer = sgd$/optimizer = sgd\nzero_grad = probe/' "$T/mlp.ini" >"$T/two.ini"
config probe <<INI
[loop]
max_steps = 1
[plugins]
step = probe
optimizer = probe
INI
$ST write "$T/w.safetensors" w:F64:2:0.5
expect 0 'trained 1 steps' "init: a plugin loads its own parameters only" \
  -- train "$T/two.ini" --set probe.init="$T/w.safetensors" --out "$T/o1" --quiet
check "init: probe's w is the file's 0.5" test "$(value 'w[1]' "$T/o1/checkpoints/last.ckpt")" = 0.5
$ST write "$T/both.safetensors" w:F64:2:0.5 "$W0" "$B0" "$W1" "$B1"
expect 2 "$T/both.safetensors: tensor \"layer0.weight\" is a parameter of plugin mlp, not of probe" \
  "init: another plugin's parameter is refused" \
  -- train "$T/two.ini" --set probe.init="$T/both.safetensors" --out "$T/o2" --quiet
expect 0 'trained 1 steps' "init: what ignore lists is skipped" \
  -- train "$T/two.ini" --set probe.init="$T/both.safetensors" --set probe.init_ignore=layer0.weight,layer0.bias,layer1.weight,layer1.bias \
  --out "$T/o3" --quiet
expect 2 "$T/both.safetensors: tensor \"layer1.bias\" is a parameter of plugin mlp" \
  "init: ignore skips only what it lists" \
  -- train "$T/two.ini" --set probe.init="$T/both.safetensors" --set probe.init_ignore=layer0.weight,layer0.bias,layer1.weight \
  --out "$T/o4" --quiet
expect 1 "lk_host_load_params after setup \(call it in create" \
  "init: loading after create is refused" \
  -- train "$T/probe.ini" --set probe.init="$T/w.safetensors" --set probe.init_late=true --out "$T/o5" --quiet

# ---- export ------------------------------------------------------------
# A trained run (SGD with momentum: the optimizer has state, which export
# leaves out), exported.
expect 0 'trained 3 steps' "a run to export" \
  -- train "$T/mlp.ini" --set loop.max_steps=3 --set loop.max_epochs=3 --set sgd.lr=0.1 --set sgd.momentum=0.9 --out "$T/run" --quiet
CK="$T/run/checkpoints/last.ckpt"
expect 0 'wrote ' "export CKPT -o FILE" -- export "$CK" -o "$T/run.safetensors"
$ST meta "$T/run.safetensors" >"$T/meta.txt"
check "export: __metadata__ format = pt, plugin = mlp, step = 3, epoch" \
  test "$(tr '\n' ' ' <"$T/meta.txt")" = "epoch=3 format=pt plugin=mlp step=3 "
$ST tensors "$T/run.safetensors" | cut -d' ' -f1-3 >"$T/names.txt"
printf '%s\n' "layer0.bias F32 8" "layer0.weight F32 8x4" "layer1.bias F32 3" "layer1.weight F32 3x8" >"$T/names.want"
check "export: every parameter with its dtype and shape, no optimizer state" cmp -s "$T/names.txt" "$T/names.want"
"$LOOPKIT" dump "$CK" >"$T/ck.dump"
$ST dump "$T/run.safetensors" >"$T/st.dump"
check "export: the values are the checkpoint's, in its order" cmp -s "$T/ck.dump" "$T/st.dump"
check "export: no temporary file left beside it" test "$(ls "$T" | grep -c 'run.safetensors')" -eq 1
expect 0 'wrote ' "export: --output, and a run directory without config.ini" \
  -- export "$CK" --output "$T/run2.safetensors"
mkdir -p "$T/bare"
cp "$CK" "$T/bare/x.ckpt"
expect 0 'wrote ' "export: a checkpoint outside a run directory" -- export "$T/bare/x.ckpt" -o "$T/bare.safetensors"
check "export: without a run's config.ini, no plugin in the metadata" \
  sh -c "! $ST meta '$T/bare.safetensors' | grep -q plugin"

# Round trip: export, init from it (lr 0: the weights stay), export again:
# the same tensors byte for byte.
expect 0 'trained 1 steps' "round trip: init from an export" \
  -- train "$T/mlp.ini" --set mlp.init="$T/run.safetensors" --out "$T/back" --quiet
expect 0 'wrote ' "round trip: export again" -- export "$T/back/checkpoints/last.ckpt" -o "$T/back.safetensors"
$ST tensors "$T/run.safetensors" >"$T/a.txt"
$ST tensors "$T/back.safetensors" >"$T/b.txt"
check "round trip: export -> init -> export gives byte-identical tensors" cmp -s "$T/a.txt" "$T/b.txt"

# What export refuses, with exit 2.
cp "$CK" "$T/keep.ckpt"
expect 2 "export: $CK is the checkpoint $CK: refusing to overwrite it" \
  "export: refuses to overwrite its input" -- export "$CK" -o "$CK"
ln -s "$CK" "$T/link.safetensors"
expect 2 "refusing to overwrite it" "export: ... by another name too" -- export "$CK" -o "$T/link.safetensors"
check "export: the checkpoint is untouched" cmp -s "$CK" "$T/keep.ckpt"
expect 2 "no such checkpoint" "export: a missing checkpoint" -- export "$T/none.ckpt" -o "$T/x.safetensors"
expect 2 "$T/run.safetensors.*(not a loopkit checkpoint|too short|magic)" "export: a file that is no checkpoint" \
  -- export "$T/run.safetensors" -o "$T/x.safetensors"
expect 2 "cannot create $T/nodir/x.safetensors" "export: a directory that does not exist" \
  -- export "$CK" -o "$T/nodir/x.safetensors"
expect 2 "usage: loopkit export CKPT -o FILE" "export: -o is required" -- export "$CK"
expect 2 "unknown option --bogus" "export: an unknown option" -- export "$CK" --bogus -o "$T/x.safetensors"
check "export: nothing written by a refused export" test ! -e "$T/x.safetensors"

# ---- torch's file and loss ---------------------------------------------
# tests/torch/safetensors_reference.py wrote a torch-initialised MLP and
# its loss on these 16 samples: loopkit's first loss from that file is
# torch's (f32 products summed in another order: 1e-6).
REF="$DATA/st_torch_mlp.ref"
expect 0 'trained 1 steps' "init from torch's own file" \
  -- train "$T/mlp.ini" --set mlp.init="$DATA/st_torch_mlp.safetensors" --set sgd.lr=0.1 --out "$T/torch" --quiet
check "the first loss from torch's weights is torch's ($(awk '$1 == "loss1" { print $2 }' "$REF"))" \
  awk -F, -v want="$(awk '$1 == "loss1" { print $2 }' "$REF")" \
  'NR == 2 { d = $3 - want; exit !(d < 1e-6 && d > -1e-6) }' "$T/torch/metrics.csv"
expect 0 'wrote ' "export the run that took torch's step" \
  -- export "$T/torch/checkpoints/last.ckpt" -o "$T/torch.safetensors"
# torch loads the export and checks it against its own step (when torch
# is installed: the test does not need it). -I and torch.tensor: the
# current directory holds a run named torch, which a bare import would
# take for the package.
if /usr/bin/python3 -I -c 'import torch; torch.tensor' 2>/dev/null; then
  check "torch loads loopkit's export: names, dtypes, shapes, its own SGD step to 1e-6" \
    /usr/bin/python3 "$LK_SRCDIR/tests/torch/safetensors_reference.py" check "$T/torch.safetensors"
else
  ok "# SKIP torch is not installed"
fi

finish

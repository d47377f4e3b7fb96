#!/bin/sh
# loopkit export CKPT -o FILE.onnx (issue 28 items 1 and 2): small
# sequential nets, trained for a few steps on generated .npy data, covering
# every built-in layer (and its variants: no bias, no affine, a 2-D
# linear, a flatten of some dimensions, a ReLU fused into max-pool), both
# joins (add, cat) inside nested blocks, a regression, are exported;
# Debian's onnx checker (full_check) passes on each file, and ONNX Runtime
# (npm's onnxruntime-node, tests/onnx/run.js) gives on the test split what
# loopkit predict gives, within 1e-4: the softmax of the logits for a
# classifier, the outputs for a regression. A language model over bytes
# (embedding first) generates in ONNX Runtime, greedily, what loopkit
# generate --top-k 1 does, and so does gpt, from contexts shorter than its
# block_size too; their logits after a prompt are loopkit's predict_step's
# (tests/onnx/logits) to 1e-4. Then the refusals: a model without an onnx
# entry (linear), a lone checkpoint. The dense classifiers mlp and softmax
# export too.
. "$LK_SRCDIR/tests/cli/lib.sh"
ORT=$LK_SRCDIR/tests/onnx
if [ ! -d "$ORT/node_modules/onnxruntime-node" ] || ! command -v node >/dev/null; then
  # TAP's skip of the whole script (an exit status of 77 is an error under
  # the TAP driver)
  echo "1..0 # SKIP onnxruntime-node is not installed: npm ci --ignore-scripts --prefix tests/onnx"
  exit 0
fi
PY=/usr/bin/python3
cd "$T" || exit 1

# npy NAME DTYPE SHAPE KIND SEED: $T/NAME.npy (tests/onnx/npy.py)
npy() { python3 "$ORT/npy.py" "$T/$1.npy" "$2" "$3" "$4" "$5"; }
# onnx_ok FILE: the onnx package's checker, full_check (shape inference)
onnx_ok() {
  "$PY" -c 'import onnx, sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)' \
    "$1" >"$T/checker.out" 2>&1
}
# graph FILE fused | io ELEM_TYPE IN_DIMS OUT_DIMS INITIALIZER...: what
# the graph holds (graph.py below)
cat >"$T/graph.py" <<'PY'
import sys
import onnx
g = onnx.load(sys.argv[1]).graph
dims = lambda v: ','.join(str(d.dim_param or d.dim_value) for d in v.type.tensor_type.shape.dim)
if sys.argv[2] == 'fused':  # a ReLU before each MaxPool
    ops = [n.op_type for n in g.node]
    ok = 'MaxPool' in ops and all(ops[i - 1] == 'Relu' for i, o in enumerate(ops) if o == 'MaxPool')
else:
    ok = ([i.name for i in g.input] == ['input'] and [o.name for o in g.output] == ['output']
          and g.input[0].type.tensor_type.elem_type == int(sys.argv[3])
          and dims(g.input[0]) == sys.argv[4] and dims(g.output[0]) == sys.argv[5]
          and set(sys.argv[6:]) <= {t.name for t in g.initializer})
sys.exit(not ok)
PY
graph() { "$PY" "$T/graph.py" "$@"; }
# same PRED ORT: loopkit predict's CSV and run.js's, each value within
# 1e-4 (tests/onnx/same.awk)
same() { awk -F, -f "$ORT/same.awk" "$1" "$2"; }
# close_row A B: two lines of comma-separated values, each within 1e-4
close_row() {
  awk -F, 'NR == 1 { n = NF; for (i = 1; i <= NF; i++) a[i] = $i; next }
    { for (i = 1; i <= NF; i++) { d = $i - a[i]; d = d < 0 ? -d : d; if (d > max) max = d }
      m = NF }
    END { printf "# %d logits, largest difference %g\n", m, max; exit !(n == m && n > 0 && max <= 1e-4) }' \
    "$1" "$2"
}
# exported NAME WHAT [--softmax]: the net of $T/NAME.ini trained in
# $T/NAME, exported from its run directory to $T/NAME.onnx, checked, and
# run in ONNX Runtime on $T/NAME_tx.npy against loopkit predict.
exported() {
  name=$1 what=$2
  shift 2
  "$LOOPKIT" train "$T/$name.ini" --out "$T/$name" --quiet >"$T/out" 2>&1
  check "$what: trains" test $? -eq 0
  expect 0 "wrote $T/$name.onnx" "... exports from its run's checkpoint to .onnx" \
    -- export "$T/$name/checkpoints/last.ckpt" -o "$T/$name.onnx"
  check "... the onnx checker (full_check) passes" onnx_ok "$T/$name.onnx"
  [ -s "$T/checker.out" ] && sed 's/^/# /' "$T/checker.out"
  "$LOOPKIT" predict "$T/$name.ini" --ckpt "$T/$name/checkpoints/last.ckpt" \
    -o "$T/$name.csv" >/dev/null 2>&1
  node "$ORT/run.js" "$T/$name.onnx" "$T/${name}_tx.npy" "$@" >"$T/$name.ort" 2>"$T/ort.err"
  check "... ONNX Runtime runs it" test $? -eq 0
  [ -s "$T/ort.err" ] && sed 's/^/# /' "$T/ort.err"
  check "... and gives loopkit predict's outputs on the test split, to 1e-4" \
    same "$T/$name.csv" "$T/$name.ort"
}
# data NAME X_DTYPE X_SHAPE X_KIND Y_DTYPE Y_SHAPE Y_KIND: training and
# test arrays NAME_x, NAME_y, NAME_tx, NAME_ty (48 and 12 samples).
data() {
  npy "${1}_x" "$2" "48,$3" "$4" 1 && npy "${1}_y" "$5" "48$6" "$7" 2 &&
    npy "${1}_tx" "$2" "12,$3" "$4" 3 && npy "${1}_ty" "$5" "12$6" "$7" 4
}
# net NAME DATA LAYERS [EXTRA]: $T/NAME.ini, sequential on DATA's
# arrays (and NAME_tx.npy, DATA's test inputs, for run.js), two epochs of
# batches of 8 (batch norm's running statistics move), EXTRA appended
# (more sections)
net() {
  name=$1
  shift
  cp "$T/${1}_tx.npy" "$T/${name}_tx.npy" 2>/dev/null
  cat >"$T/$name.ini" <<INI
[loop]
max_epochs = 2
seed = 1
[plugins]
step = sequential
optimizer = adam
data = npy
[npy]
x = ${1}_x.npy
y = ${1}_y.npy
test_x = ${1}_tx.npy
test_y = ${1}_ty.npy
batch_size = 8
[adam]
lr = 0.01
[sequential]
layers = $2
${3:-}
INI
}

# ---- every layer: the reference net of tests/data/sequential ----
data img f4 1,8,8 normal i8 "" int:3
net every img "$(sed -n 's/^layers //p' "$LK_SRCDIR/tests/data/sequential/reference.txt")"
exported every "conv2d, batchnorm2d, relu fused into maxpool2d, a strided conv2d, gelu, avgpool2d padded, tanh, flatten, linear, layernorm, sigmoid, batchnorm1d, linear" --softmax
check "... the fused ReLU is its own node before MaxPool" graph "$T/every.onnx" fused
check "... the weights are initializers under the checkpoint's names; one input, one output, the batch dynamic" \
  graph "$T/every.onnx" io 1 N,1,8,8 N,3 0.weight 0.bias 1.running_mean 1.running_var 13.weight

# ---- the variants, and both joins in nested blocks ----
net branch img "conv2d(4, 3, padding=1), outer, @b, conv2d(2, 1), cat(@b), dropout(0.3), maxpool2d(2, stride=1), flatten(2), linear(5), batchnorm1d, layernorm(elementwise_affine=false), relu, flatten, linear(3, bias=false)" "[res]
layers = @in, conv2d(4, 3, padding=1, bias=false), batchnorm2d(affine=false), relu, add(@in)
[outer]
layers = res, sigmoid, res"
exported branch "add and cat in nested blocks, conv2d and linear without bias, batch norm without affine, dropout, a linear over [C, L], batchnorm1d over [C, L], layernorm without affine" --softmax

# ---- a regression: its outputs as they are ----
data reg f4 6 normal f4 ",2" normal
net reg reg "linear(8), tanh, linear(2)" "loss = mse"
exported reg "a regression (mse): linear, tanh, linear"

# ---- convolutions and pools of issue 27: Conv's dilations and group,
# 1-d windows, the adaptive pools as GlobalAveragePool or AveragePool ----
net dil img "conv2d(4, 3, padding=2, dilation=2), relu, conv2d(8, 3, stride=2, padding=1, groups=4), conv2d(8, 3, padding=1, groups=8, bias=false), adaptiveavgpool2d(2), tanh, adaptiveavgpool2d(1), flatten, linear(3)"
exported dil "conv2d with dilation, groups and depthwise, adaptiveavgpool2d uniform and global" --softmax
data seq f4 2,12 normal i8 "" int:3
net seq seq "conv1d(6, 3, padding=2, dilation=2), relu, conv1d(6, 3, groups=3, stride=2, padding=1, bias=false), maxpool1d(3, 1, 1), avgpool1d(3, 1, 1), adaptiveavgpool1d(2), flatten, linear(3)"
exported seq "conv1d (dilation, groups, stride, no bias), maxpool1d, avgpool1d padded, adaptiveavgpool1d uniform" --softmax
net seq1 seq "conv1d(4, 3, 1, 1, 1, 2), adaptiveavgpool1d(1), flatten, linear(3)"
exported seq1 "conv1d with its arguments by position, adaptiveavgpool1d(1)" --softmax
net uneven seq "adaptiveavgpool1d(5), flatten, linear(3)"
"$LOOPKIT" train "$T/uneven.ini" --out "$T/uneven" --quiet >"$T/out" 2>&1
expect 2 'adaptiveavgpool1d: output_size 5 over a length of 12: ONNX has no adaptive pool, and these bins are uneven' \
  "uneven adaptive bins are refused, naming the layer" \
  -- export "$T/uneven/checkpoints/last.ckpt" -o "$T/uneven.onnx"

# ---- a language model over bytes: tokens, int64 in ONNX ----
cat >"$T/lm.ini" <<INI
[loop]
max_steps = 300
seed = 1
[plugins]
step = sequential
optimizer = adamw
data = text
[text]
path = $LK_SRCDIR/NEWS
batch_size = 16
batches_per_epoch = 100
[adamw]
lr = 0.01
[sequential]
layers = embedding(256, 8), layernorm, gelu, linear(16), relu, linear(256)
block_size = 12
INI
"$LOOPKIT" train "$T/lm.ini" --out "$T/lm" --quiet >"$T/out" 2>&1
check "a language model over bytes (embedding, layernorm, gelu, linear over [T, C]): trains" test $? -eq 0
expect 0 "wrote $T/lm.onnx" "... exports to .onnx" \
  -- export "$T/lm/checkpoints/last.ckpt" -o "$T/lm.onnx"
check "... the onnx checker (full_check) passes" onnx_ok "$T/lm.onnx"
check "... its input int64 [N, 12], its output [N, 12, 256]" \
  graph "$T/lm.onnx" io 7 N,12 N,12,256 0.weight
"$LOOPKIT" generate "$T/lm.ini" --ckpt "$T/lm/checkpoints/last.ckpt" --prompt "- loopkit export " \
  --tokens 40 --top-k 1 >"$T/lm.gen" 2>/dev/null
node "$ORT/run.js" "$T/lm.onnx" --greedy "- loopkit export " 40 12 >"$T/lm.ort" 2>"$T/ort.err"
check "... in ONNX Runtime, greedily, 40 bytes: what loopkit generate --top-k 1 gives" \
  sh -c "test \$(wc -c <'$T/lm.ort') -eq 57 && cmp -s '$T/lm.gen' '$T/lm.ort'"
[ -s "$T/ort.err" ] && sed 's/^/# /' "$T/ort.err"
"$LK_BUILDDIR/tests/onnx/logits" "$T/lm.ini" "$T/lm/checkpoints/last.ckpt" "- loopkit ex" \
  >"$T/lm.lk" 2>"$T/logits.err"
node "$ORT/run.js" "$T/lm.onnx" --last "- loopkit ex" >"$T/lm.last" 2>"$T/ort.err"
check "... its logits after 12 bytes: loopkit's (predict_step), to 1e-4" \
  close_row "$T/lm.lk" "$T/lm.last"
cat "$T/logits.err" "$T/ort.err" | sed 's/^/# /'

# ---- gpt: tokens [N, T], T given at run time up to block_size ----
awk 'BEGIN { for (i = 0; i < 3000; i++) printf "%d: the cat sat on the mat.\n", (i * 7) % 97 }' \
  >"$T/corpus.txt"
cat >"$T/gpt.ini" <<INI
[loop]
max_epochs = 2
threads = 1
seed = 7
[plugins]
step = gpt
data = text
optimizer = adamw
[text]
path = corpus.txt
block_size = 16
batch_size = 8
batches_per_epoch = 50
val_batches = 8
[adamw]
lr = 0.01
[gpt]
n_layer = 2
n_head = 2
n_embd = 32
block_size = 16
INI
"$LOOPKIT" train "$T/gpt.ini" --out "$T/gpt" --quiet >"$T/out" 2>&1
check "gpt (2 blocks, 2 heads, tied head): trains" test $? -eq 0
expect 0 "wrote $T/gpt.onnx" "... exports to .onnx" \
  -- export "$T/gpt/checkpoints/last.ckpt" -o "$T/gpt.onnx"
check "... the onnx checker (full_check) passes" onnx_ok "$T/gpt.onnx"
[ -s "$T/checker.out" ] && sed 's/^/# /' "$T/checker.out"
check "... its input int64 [N, T], its output [N, T, 256], nanoGPT's names, the head tied (no lm_head.weight)" \
  sh -c "'$PY' '$T/graph.py' '$T/gpt.onnx' io 7 N,T N,T,256 transformer.wte.weight transformer.wpe.weight \
    transformer.h.1.attn.c_attn.weight transformer.ln_f.bias &&
    ! '$PY' '$T/graph.py' '$T/gpt.onnx' io 7 N,T N,T,256 lm_head.weight"
for prompt in "12: the cat sat " "7"; do  # block_size tokens, and one
  "$LK_BUILDDIR/tests/onnx/logits" "$T/gpt.ini" "$T/gpt/checkpoints/last.ckpt" "$prompt" \
    >"$T/gpt.lk" 2>"$T/logits.err"
  node "$ORT/run.js" "$T/gpt.onnx" --last "$prompt" >"$T/gpt.last" 2>"$T/ort.err"
  check "... the logits after \"$prompt\" (${#prompt} tokens): loopkit's (predict_step), to 1e-4" \
    close_row "$T/gpt.lk" "$T/gpt.last"
  cat "$T/logits.err" "$T/ort.err" | sed 's/^/# /'
done
sed 's/^n_layer = 2$/n_layer = 1\nbias = false/' "$T/gpt.ini" >"$T/gptnb.ini"
"$LOOPKIT" train "$T/gptnb.ini" --out "$T/gptnb" --quiet >/dev/null 2>&1
"$LOOPKIT" export "$T/gptnb/checkpoints/last.ckpt" -o "$T/gptnb.onnx" >/dev/null 2>&1
check "... without biases (bias = false, one block): exported, the onnx checker passes" \
  onnx_ok "$T/gptnb.onnx"
"$LK_BUILDDIR/tests/onnx/logits" "$T/gptnb.ini" "$T/gptnb/checkpoints/last.ckpt" "3: the" \
  >"$T/gptnb.lk" 2>"$T/logits.err"
node "$ORT/run.js" "$T/gptnb.onnx" --last "3: the" >"$T/gptnb.last" 2>"$T/ort.err"
check "... and its logits are loopkit's, to 1e-4" close_row "$T/gptnb.lk" "$T/gptnb.last"
cat "$T/logits.err" "$T/ort.err" | sed 's/^/# /'
# From a 7-byte prompt: contexts of 7 to 16 tokens, then the last 16.
"$LOOPKIT" generate "$T/gpt.ini" --ckpt "$T/gpt/checkpoints/last.ckpt" --prompt "12: the" \
  --tokens 60 --top-k 1 >"$T/gpt.gen" 2>/dev/null
node "$ORT/run.js" "$T/gpt.onnx" --greedy "12: the" 60 16 >"$T/gpt.ort" 2>"$T/ort.err"
check "... in ONNX Runtime, greedily, 60 bytes from a shorter context than block_size: what loopkit generate --top-k 1 gives" \
  sh -c "test \$(wc -c <'$T/gpt.ort') -eq 67 && cmp -s '$T/gpt.gen' '$T/gpt.ort' &&
    test \$(tr -cd 'cat' <'$T/gpt.ort' | wc -c) -gt 10"
[ -s "$T/ort.err" ] && sed 's/^/# /' "$T/ort.err"

# ---- the same with CONFIG --ckpt, and what is refused ----
expect 0 "wrote $T/reg2.onnx" "export CONFIG --ckpt CKPT -o FILE.onnx" \
  -- export "$T/reg.ini" --ckpt "$T/reg/checkpoints/last.ckpt" -o "$T/reg2.onnx"
check "... the same file as from the run directory" cmp -s "$T/reg.onnx" "$T/reg2.onnx"
cp "$T/reg/checkpoints/last.ckpt" "$T/lone.ckpt"
expect 2 'an ONNX model needs the model.s config' \
  "a checkpoint outside a run directory, without CONFIG: refused (exit 2), saying why" \
  -- export "$T/lone.ckpt" -o "$T/lone.onnx"
check "... and writes nothing" test ! -e "$T/lone.onnx"
# The dense classifiers (the default example's mlp, softmax): Gemm a layer.
for model in mlp softmax; do
  cp "$T/reg_tx.npy" "$T/${model}_tx.npy"
  cat >"$T/$model.ini" <<INI
[loop]
max_steps = 4
[plugins]
step = $model
optimizer = sgd
data = npy
[npy]
x = reg_x.npy
y = img_y.npy
test_x = reg_tx.npy
test_y = img_ty.npy
batch_size = 8
[sgd]
lr = 0.1
INI
  if [ $model = mlp ]; then
    printf '[mlp]\nlayers = 6,5,4,3\nactivation = tanh\n' >>"$T/$model.ini"
  else
    printf '[softmax]\ninputs = 6\nclasses = 3\n' >>"$T/$model.ini"
  fi
  exported $model "$model, a dense classifier (Gemm; tanh between mlp's)" --softmax
done
check "... mlp's graph: f32 [N, 6] to [N, 3], its layers' weights" \
  graph "$T/mlp.onnx" io 1 N,6 N,3 layer0.weight layer2.bias
cat >"$T/lin.ini" <<INI
[loop]
max_steps = 2
[plugins]
step = linear
optimizer = sgd
data = npy
[npy]
x = reg_x.npy
y = reg_y.npy
[sgd]
lr = 0.01
[linear]
inputs = 6
outputs = 2
INI
"$LOOPKIT" train "$T/lin.ini" --out "$T/lin" --quiet >/dev/null 2>&1
expect 2 'model linear cannot be exported to ONNX' \
  "a model whose step has no onnx entry: refused (exit 2), naming it" \
  -- export "$T/lin/checkpoints/last.ckpt" -o "$T/lin.onnx"
check "... and writes nothing" test ! -e "$T/lin.onnx"
expect 0 "wrote $T/lin.safetensors" "... its .safetensors export is as it was" \
  -- export "$T/lin/checkpoints/last.ckpt" -o "$T/lin.safetensors"

# ---- the activations, each lowered from ONNX ops when opset 17 has no
# operator of its own (silu, softplus's beta and threshold, mish): each in
# a regression of its own, first, on N(0, 1) data of both signs (softplus
# takes its threshold rule there), its outputs compared as they are (a
# deep net of them all squashes the differences below 1e-4) ----
data imgr f4 2,4,4 normal f4 ",2" normal
k=0
for act in silu "leakyrelu(0.2)" "elu(0.5)" "softplus(2, 1)" mish hardswish \
  hardsigmoid "softmax(1)" "logsoftmax(-2)" "identity, flatten, linear(2), identity"; do
  k=$((k + 1))
  case $act in
  identity*) layers=$act ;;
  *) layers="$act, flatten, linear(2)" ;;
  esac
  net act$k imgr "$layers" "loss = mse"
  exported act$k "$layers, a regression"
done

# ---- npy's tokens (int64 x, tokens = 10) into an embedding with
# padding_idx: int64 in ONNX too ----
data tok i8 6 int:10 i8 "" int:3
net tok tok "embedding(10, 4, padding_idx=2), flatten, linear(3)"
sed -i 's/^batch_size = 8$/batch_size = 8\ntokens = 10/' "$T/tok.ini"
exported tok "npy tokens (int64 x, tokens = 10) into embedding(10, 4, padding_idx=2), flatten, linear" --softmax
check "... its input int64 [N, 6]" graph "$T/tok.onnx" io 7 N,6 N,3 0.weight

finish

#!/bin/sh
# loopkit export CKPT -o FILE.onnx of the recurrent layers: lstm and gru,
# one and two layers, bidirectional, without biases, become ONNX LSTM and
# GRU nodes (opset 17; the gates reordered to ONNX's i, o, f, c and z, r,
# h; the GRU's linear_before_reset = 1, torch's), one a layer, between
# Transposes to and from ONNX Runtime's only layout (time first) and a
# Reshape of [N, T, D, H] to [N, T, D H];
# last becomes Gather then Reshape;
# the onnx checker (full_check) passes, and ONNX Runtime (npm's
# onnxruntime-node, tests/onnx/run.js) gives loopkit predict's outputs on
# the test split to 1e-4. Skipped where onnxruntime-node is not installed
# (as tests/cli/onnx.sh).
. "$LK_SRCDIR/tests/cli/lib.sh"
ORT=$LK_SRCDIR/tests/onnx
if [ ! -d "$ORT/node_modules/onnxruntime-node" ] || ! command -v node >/dev/null; then
  echo "1..0 # SKIP onnxruntime-node is not installed: npm ci --ignore-scripts --prefix tests/onnx"
  exit 0
fi
PY=/usr/bin/python3
cd "$T" || exit 1
npy() { python3 "$ORT/npy.py" "$T/$1.npy" "$2" "$3" "$4" "$5"; }
npy x f4 48,6,3 normal 1 && npy y i8 48 int:3 2 && npy tx f4 12,6,3 normal 3 &&
  npy ty i8 12 int:3 4 || exit 1

# exported LAYERS WHAT: a net trained two epochs, exported, checked, run
exported() {
  cat >"$T/net.ini" <<INI
[loop]
max_epochs = 2
seed = 1
[plugins]
step = sequential
optimizer = adam
data = npy
[npy]
x = $T/x.npy
y = $T/y.npy
test_x = $T/tx.npy
test_y = $T/ty.npy
batch_size = 8
[adam]
lr = 0.01
[sequential]
layers = $1
INI
  rm -rf "$T/run" "$T/net.onnx"
  "$LOOPKIT" train "$T/net.ini" --out "$T/run" --quiet >"$T/out" 2>&1
  check "$2: trains" test $? -eq 0
  expect 0 "wrote $T/net.onnx" "... exports to .onnx" \
    -- export "$T/run/checkpoints/last.ckpt" -o "$T/net.onnx"
  check "... the onnx checker (full_check) passes" "$PY" -c \
    'import onnx, sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)' "$T/net.onnx"
  check "... its nodes: $3" sh -c "'$PY' -c 'import onnx, sys; print(\" \".join(n.op_type for n in onnx.load(sys.argv[1]).graph.node))' '$T/net.onnx' | grep -qx '$3'"
  "$LOOPKIT" predict "$T/net.ini" --ckpt "$T/run/checkpoints/last.ckpt" \
    -o "$T/pred.csv" >/dev/null 2>&1
  node "$ORT/run.js" "$T/net.onnx" "$T/tx.npy" --softmax >"$T/ort.csv" 2>"$T/ort.err"
  check "... ONNX Runtime runs it" test $? -eq 0
  [ -s "$T/ort.err" ] && sed 's/^/# /' "$T/ort.err"
  check "... and gives loopkit predict's outputs on the test split, to 1e-4" \
    awk -F, -f "$ORT/same.awk" "$T/pred.csv" "$T/ort.csv"
}
exported 'lstm(5), last, linear(3)' "lstm" 'Transpose LSTM Transpose Reshape Gather Reshape Gemm'
exported 'gru(5), last, linear(3)' "gru" 'Transpose GRU Transpose Reshape Gather Reshape Gemm'
exported 'lstm(4, 2, bidirectional=false), linear(3), last' "two lstm layers, a linear on every step" \
  'Transpose LSTM Transpose Reshape Transpose LSTM Transpose Reshape Transpose MatMul Add Gather Reshape'
exported 'gru(4, bidirectional=true), last, linear(3)' "a bidirectional gru" 'Transpose GRU Transpose Reshape Gather Reshape Gemm'
exported 'lstm(3, 2, bias=false, bidirectional=true), last, linear(3)' "two bidirectional lstm layers without biases" \
  'Transpose LSTM Transpose Reshape Transpose LSTM Transpose Reshape Gather Reshape Gemm'
finish

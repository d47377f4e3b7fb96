#!/bin/sh
# Layer plugins (kind layers, ABI 1.6): `loopkit new NAME --kind layer`
# writes Swish (x sigmoid(beta x)) as a layer plugin that builds out of
# tree with its generated Makefile and pkg-config alone (here against the build tree's headers),
# and trains a sequential net through `[plugins] layers`, its backward held
# against central differences (gradcheck), its own ONNX lowering exported
# (and run in ONNX Runtime when tests/onnx has it), one without a lowering
# refused by export; plugins and inspect list its
# layer and argument; a layer named like a built-in or like another
# plugin's, a plugin of no layers and one of another kind are config
# errors (exit 2) naming both sides.
. "$LK_SRCDIR/tests/cli/lib.sh"
: "${LK_BUILDDIR:?}"
umask 022

# pkg-config's view of the build tree: its headers, nothing installed.
mkdir "$T/pc"
cat >"$T/pc/loopkit.pc" <<PC
Name: loopkit
Description: loopkit, the build tree's headers
Version: 0
Cflags: -I$LK_SRCDIR/include -I$LK_BUILDDIR/include
PC
build() { # DIR: its generated Makefile, warnings as errors
  PKG_CONFIG_PATH="$T/pc" make -s -C "$1" CFLAGS='-O2 -Wall -Wextra -Werror' \
    >"$T/build.log" 2>&1
}
W=$T/w
mkdir "$W" && cd "$W" || exit 1
lk_in() { # DIR ARGS...: loopkit ARGS run in DIR, its output in $T/out
  dir=$1
  shift
  (cd "$dir" && "$LOOPKIT" "$@") >"$T/out" 2>&1
}

"$LOOPKIT" new mysilu --kind layer >"$T/out" 2>&1
check "new --kind layer writes mysilu/ with its source, Makefile, config, data and README" \
  sh -c "test -f mysilu/mysilu.c && test -f mysilu/Makefile && test -f mysilu/mysilu.ini &&
    test -f mysilu/features.csv && test -f mysilu/README.md"
build mysilu
check "make builds mysilu.so with pkg-config alone, no warning" test -f mysilu/mysilu.so
S=$W/mysilu/mysilu.so

lk_in mysilu inspect ./mysilu.so
check "inspect: its kind is layers" grep -q '^kinds: *layers$' "$T/out"
check "inspect: its layer, with its summary" grep -q '^  swish: x \* sigmoid(beta x)$' "$T/out"
check "inspect: its argument's type, range and default, then its help" sh -c "
  grep -Eq '^    beta +real \(0, inf\) +default 1\$' '$T/out' &&
  grep -q '^        the slope inside the sigmoid' '$T/out'"
LOOPKIT_PLUGIN_PATH="$W/mysilu:$LOOPKIT_PLUGIN_PATH" "$LOOPKIT" plugins >"$T/out" 2>&1
check "plugins: the kind layers, and the layer with its arguments" sh -c "
  grep -Eq '^mysilu +layers ' '$T/out' && grep -q '^    layers: swish(beta)\$' '$T/out'"

# ---- it trains a sequential net --------------------------------------------
lk_in mysilu train mysilu.ini --out run
status=$?
check "train mysilu.ini: sequential with linear(16), swish(beta=1), linear(1)" test $status -eq 0
check "... the loss falls tenfold from the first step to the last" \
  awk -F, 'NR > 1 && $3 != "" { if (first == "") first = $3; last = $3 }
    END { exit !(first > 0 && last < first / 10) }' mysilu/run/metrics.csv
check "... and the run's summary names the layer" sh -c "
  cd mysilu && '$LOOPKIT' summary mysilu.ini 2>&1 | grep -q swish"
# predict --input opens the net with lk_model, [plugins] layers included.
cut -d, -f1,2 mysilu/features.csv >mysilu/x.csv
lk_in mysilu predict mysilu.ini --ckpt run/checkpoints/last.ckpt \
  --set csv.test=features.csv -o ref.csv
lk_in mysilu predict mysilu.ini --ckpt run/checkpoints/last.ckpt --input x.csv -o in.csv
check "predict --input of the net with the layer plugin's swish: predict's rows" sh -c "
  test \$(wc -l <mysilu/in.csv) -gt 2 && cmp -s mysilu/ref.csv mysilu/in.csv"
lk_in mysilu gradcheck mysilu.ini
status=$?
check "gradcheck: swish's backward agrees with central differences" sh -c "
  test $status -eq 0 && grep -q '^gradcheck: passed' '$T/out'"
lk_in mysilu gradcheck mysilu.ini --set 'sequential.layers=linear(8), Swish(2.5), linear(4), swish(beta=0.5), linear(1)'
status=$?
check "gradcheck: and with other betas, by position and keyword, any case" sh -c "
  test $status -eq 0 && grep -q '^gradcheck: passed' '$T/out'"
# A wrong backward is still caught where ReLU and batch norm make the
# differences' window matter (gradcheck judges an element over tolerance
# again against the backward's own values across its window): the Swish's
# derivative without its second term.
mkdir wrong && sed 's/"mysilu"/"wrongsilu"/; s/(s + beta \* x\[0\]\[i\] \* s \* (1.0f - s))/(s)/' \
  mysilu/mysilu.c >wrong/wrongsilu.c
check "... (the planted error is in the copy)" sh -c "! grep -q 'beta \* x\[0\]\[i\] \* s' wrong/wrongsilu.c"
cc -std=c11 -shared -fPIC -fvisibility=hidden -I"$LK_SRCDIR/include" -I"$LK_BUILDDIR/include" \
  wrong/wrongsilu.c -o wrong/wrongsilu.so -lm 2>"$T/build.log"
lk_in mysilu gradcheck mysilu.ini --set "plugins.layers=$W/wrong/wrongsilu.so" \
  --set 'sequential.layers=linear(16), batchnorm1d, relu, linear(8), swish, linear(1)'
status=$?
check "gradcheck: a Swish with a wrong backward after batch norm and ReLU fails (exit 1)" sh -c "
  test $status -eq 1 && grep -q 'over tolerance' '$T/out'"
lk_in mysilu gradcheck mysilu.ini \
  --set 'sequential.layers=linear(16), batchnorm1d, relu, linear(8), swish, linear(1)'
status=$?
check "... where the right one passes" sh -c "
  test $status -eq 0 && grep -q '^gradcheck: passed' '$T/out'"
lk_in mysilu train mysilu.ini --out bad --set 'sequential.layers=linear(8), swish(beta=0), linear(1)'
status=$?
check "swish(beta=0): its range refused (exit 2)" sh -c "
  test $status -eq 2 && grep -q 'beta = 0: must be > 0' '$T/out'"
lk_in mysilu train mysilu.ini --out bad --set plugins.layers=none
status=$?
check "without [plugins] layers swish is unknown; the message lists the built-ins" sh -c "
  test $status -eq 2 && grep -q 'unknown layer swish; expected one of conv2d, ' '$T/out'"
lk_in mysilu train mysilu.ini --out bad --set 'sequential.layers=linear(8), mystery, linear(1)'
status=$?
check "an unknown layer: the message lists the plugin's too" sh -c "
  test $status -eq 2 && grep -q 'unknown layer mystery; expected one of conv2d, .*identity, lstm, gru, last, conv1d, maxpool1d, avgpool1d, adaptiveavgpool1d, adaptiveavgpool2d, swish' '$T/out'"

# ---- its ONNX lowering (the table's onnx, loopkit/onnx.h) ----------------
lk_in mysilu export run/checkpoints/last.ckpt -o silu.onnx
status=$?
check "export to .onnx: the plugin's layer lowers itself (Mul, Sigmoid, Mul), the onnx checker passes" sh -c "
  test $status -eq 0 && /usr/bin/python3 -c 'import onnx, sys
m = onnx.load(sys.argv[1]); onnx.checker.check_model(m, full_check=True)
ops = [n.op_type for n in m.graph.node]
sys.exit(ops != [\"Gemm\", \"Mul\", \"Sigmoid\", \"Mul\", \"Gemm\"])' mysilu/silu.onnx"
ORT=$LK_SRCDIR/tests/onnx
if [ -d "$ORT/node_modules/onnxruntime-node" ] && command -v node >/dev/null; then
  # features.csv without its label column, as float32 .npy, the test split
  /usr/bin/python3 -c 'import numpy, sys
numpy.save(sys.argv[2], numpy.loadtxt(sys.argv[1], delimiter=",", skiprows=1, dtype="float32")[:, :-1])' \
    mysilu/features.csv "$T/features.npy"
  lk_in mysilu predict mysilu.ini --ckpt run/checkpoints/last.ckpt --set csv.test=features.csv -o pred.csv
  node "$ORT/run.js" mysilu/silu.onnx "$T/features.npy" >"$T/silu.ort" 2>&1
  check "... ONNX Runtime gives loopkit predict's outputs on features.csv, to 1e-4" \
    awk -F, -f "$ORT/same.awk" mysilu/pred.csv "$T/silu.ort"
else
  ok "... ONNX Runtime gives loopkit predict's outputs # SKIP onnxruntime-node is not installed (npm ci --ignore-scripts --prefix tests/onnx)"
fi
mkdir noonnx && sed 's/"mysilu"/"noonnx"/; s/\.onnx = onnx,/.onnx = NULL,/' mysilu/mysilu.c >noonnx/noonnx.c
check "... (the copy has no lowering)" sh -c "grep -q '.onnx = NULL,' noonnx/noonnx.c"
cc -std=c11 -shared -fPIC -fvisibility=hidden -I"$LK_SRCDIR/include" -I"$LK_BUILDDIR/include" \
  noonnx/noonnx.c -o noonnx/noonnx.so -lm 2>"$T/build.log"
lk_in mysilu train mysilu.ini --out run2 --set "plugins.layers=$W/noonnx/noonnx.so" --set loop.max_epochs=1
lk_in mysilu export run2/checkpoints/last.ckpt -o no.onnx
status=$?
check "a layer without a lowering: export to .onnx refused (exit 2), naming the layer, and nothing written" sh -c "
  test $status -eq 2 && grep -q 'layers: layer 1 \"swish(beta=1)\": swish cannot be exported to ONNX' '$T/out' &&
  test ! -e mysilu/no.onnx"

# ---- clashes ---------------------------------------------------------------
mkdir relu && sed 's/"swish"/"ReLU"/; s/"mysilu"/"myrelu"/' mysilu/mysilu.c >relu/myrelu.c
cc -std=c11 -shared -fPIC -fvisibility=hidden -I"$LK_SRCDIR/include" -I"$LK_BUILDDIR/include" \
  relu/myrelu.c -o relu/myrelu.so -lm 2>"$T/build.log"
lk_in mysilu train mysilu.ini --out bad --set "plugins.layers=./mysilu.so, $W/relu/myrelu.so"
status=$?
check "a layer named like a built-in, any case: exit 2 naming both" sh -c "
  test $status -eq 2 && grep -q 'layer ReLU of plugin myrelu ($W/relu/myrelu.so) has the name of the built-in layer relu' '$T/out'"
"$LOOPKIT" new twin --kind layers >/dev/null 2>&1 && build twin
lk_in mysilu train mysilu.ini --out bad --set "plugins.layers=./mysilu.so, $W/twin/twin.so"
status=$?
check "two plugins with one layer name: exit 2 naming both plugins and paths" sh -c "
  test $status -eq 2 && grep -q 'layer swish of plugin twin ($W/twin/twin.so) has the name of layer swish of plugin mysilu (./mysilu.so)' '$T/out'"
mkdir empty && sed 's/{&swish, NULL}/{NULL}/; s/"mysilu"/"empty"/' mysilu/mysilu.c >empty/empty.c
cc -std=c11 -shared -fPIC -fvisibility=hidden -w -I"$LK_SRCDIR/include" -I"$LK_BUILDDIR/include" \
  empty/empty.c -o empty/empty.so -lm 2>"$T/build.log"
lk_in mysilu train mysilu.ini --out bad --set "plugins.layers=$W/empty/empty.so"
status=$?
check "a layers plugin that lists no layers: exit 2" sh -c "
  test $status -eq 2 && grep -q 'plugin empty ($W/empty/empty.so) lists no layers' '$T/out'"
lk_in mysilu train mysilu.ini --out bad --set "plugins.layers=./mysilu.so, sgd"
status=$?
check "a plugin of another kind in [plugins] layers: exit 2 naming it" sh -c "
  test $status -eq 2 && grep -q 'sgd' '$T/out' && grep -q 'layers' '$T/out'"
check "none of the refused runs wrote a run directory" test ! -e mysilu/bad

finish

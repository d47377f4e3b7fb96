#!/bin/sh
# loopkit gradcheck: analytic backwards against central differences.
. "$LK_SRCDIR/tests/cli/lib.sh"
EX="$LK_SRCDIR/examples/rosenbrock.ini"
cd "$T" || exit 1 # gradcheck must leave no runs/ here

expect 0 '^x +[0-9.e-]+ +2 *$' "rosenbrock f64: one row for x, 2 elements checked" \
  -- gradcheck "$EX" --tolerance 1e-8
expect 0 '^x +' "rosenbrock f32, n = 5, within 1e-3" \
  -- gradcheck "$EX" --set rosenbrock.dtype=f32 --set rosenbrock.n=5 --tolerance 1e-3
config lin <<INI
[plugins]
step = linreg
optimizer = sgd
data = synthetic
[sgd]
lr = 0.001
INI
expect 0 '^bias ' "a data model: every parameter reported" -- gradcheck "$T/lin.ini" --batches 3 --tolerance 1e-6
check "a data model: weight reported" grep -q '^weight ' "$T/out"
config wrong <<INI
[loop]
max_steps = 1
[plugins]
step = probe
optimizer = sgd
[probe]
grad = 3
[sgd]
lr = 0.001
INI
expect 1 'w +[0-9.e-]+ +2 +over tolerance' "a wrong backward is caught" -- gradcheck "$T/wrong.ini" --tolerance 1e-3
expect 1 'w +[0-9.e-]+ +2 +over tolerance 1e-06' "... and so it is at the default tolerance, exit 1" -- gradcheck "$T/wrong.ini"
check "... which says it failed" grep -q '^gradcheck: FAILED: 1 parameter over tolerance 1e-06 for f64$' "$T/out"

# Defaults by dtype: f64 within 1e-6, f32 within 1e-2, and a note that f32
# limits what the check can see.
expect 0 '^gradcheck: passed \(tolerance 1e-06 for f64\)$' "rosenbrock f64 passes at the default tolerance" -- gradcheck "$EX"
check "... with no f32 note" sh -c "! grep -q 'f32' '$T/out'"
expect 0 '^gradcheck: passed \(tolerance 0\.01 for f32\)$' "rosenbrock f32 passes at the f32 default" \
  -- gradcheck "$EX" --set rosenbrock.dtype=f32 --set rosenbrock.n=5
check "... and says that f32 limits the check" grep -q '^note: 1 parameter is f32: the differences step by 0.003' "$T/out"
config seq <<INI
[plugins]
step = sequential
optimizer = sgd
data = idx
[idx]
dir = $LK_TEST_DATA/sequential
batch_size = 4
shuffle = false
normalize = scale
[sequential]
layers = conv2d(3, 3, stride=2), tanh, flatten, linear(3)
[sgd]
lr = 0.001
INI
expect 0 '^gradcheck: passed \(tolerance 0\.01 for f32\)$' "an f32 network (sequential) passes at the default" -- gradcheck "$T/seq.ini"
check "... every parameter reported, none over" sh -c "grep -q '^3\.bias ' '$T/out' && ! grep -q over '$T/out'"
check "... with the f32 note" grep -q '^note: 4 parameters are f32' "$T/out"
# --tolerance sets the bar for every parameter, whatever its dtype.
expect 1 'over tolerance 1e-09' "--tolerance overrides the dtype's default" -- gradcheck "$T/seq.ini" --tolerance 1e-9
expect 0 'passed \(tolerance inf\)' "--tolerance inf only reports" -- gradcheck "$T/wrong.ini" --tolerance inf
expect 2 'gradcheck: --samples "x": expected a number' "bad --samples" -- gradcheck "$EX" --samples x
expect 2 'gradcheck: no config file' "gradcheck without a config" -- gradcheck
check "gradcheck writes no run directory" test ! -d "$T/runs"
# The GPT example, shortened: every evaluation from the same generator
# state, the error scaled by no less than f32's noise over the tolerance (it failed
# before on biases whose gradient is near f32's noise).
J=/usr/share/doc/jargon-text/jargon.txt.gz
if test -r "$J"; then
  expect 0 'gradcheck: passed' "the gpt example, shortened, passes" \
    -- gradcheck "$LK_SRCDIR/examples/gpt-jargon.ini" --set gpt.n_layer=1 \
    --set gpt.n_embd=16 --set gpt.n_head=2 --set gpt.block_size=8 \
    --set text.batch_size=2 --batches 1 --samples 8
fi
# The Fashion-MNIST examples, shortened: ReLU nets whose hidden biases
# failed before on batches where a step of 0.003 crosses ReLU's zero (or a
# max pooling's tie) for some image on one side or both, one-sided
# differences agreeing or not: each element is differenced with h and
# h / 8 too, and h / 8 stands where the two disagree.
if [ -d /usr/share/datasets/fashion-mnist ]; then
  expect 0 '^gradcheck: passed \(tolerance 0\.01 for f32\)$' \
    "the mlp example (fashion-mnist.ini), one batch of 128, passes" \
    -- gradcheck "$LK_SRCDIR/examples/fashion-mnist.ini" --batches 1 --samples 20
  check "... every parameter reported, none over, none skipped" \
    sh -c "grep -q '^layer2.bias ' '$T/out' && ! grep -q 'over\\|skipped' '$T/out'"
  expect 0 '^gradcheck: passed \(tolerance 0\.01 for f32\)$' \
    "the long mlp example (fashion-mnist-long.ini), one batch, passes" \
    -- gradcheck "$LK_SRCDIR/examples/fashion-mnist-long.ini" --batches 1 --samples 8
  expect 0 '^gradcheck: passed \(tolerance 0\.01 for f32\)$' \
    "the CNN example (fashion-mnist-cnn.ini: max pooling), one batch of 64, passes" \
    -- gradcheck "$LK_SRCDIR/examples/fashion-mnist-cnn.ini" --batches 1 --samples 10
  check "... every parameter reported, none over" \
    sh -c "grep -q '^9.bias ' '$T/out' && ! grep -q over '$T/out'"
  expect 1 'over tolerance 1e-09' "... and --tolerance 1e-9 still fails it" \
    -- gradcheck "$LK_SRCDIR/examples/fashion-mnist-cnn.ini" --batches 1 --samples 2 --tolerance 1e-9
  # The residual example: batch norm and ReLU after each conv, so that one
  # conv weight moves every unit of its channel and units flip inside the
  # differences' window (differences at f32's step are 1 to 4% off the
  # derivative there even in exact arithmetic): an element over tolerance
  # is judged again over its window. Failed before, at batches of 32.
  expect 0 '^gradcheck: passed \(tolerance 0\.01 for f32\)$' \
    "the ResNet example (fashion-mnist-resnet.ini: batch norm, ReLU, add), one batch of 32, passes" \
    -- gradcheck "$LK_SRCDIR/examples/fashion-mnist-resnet.ini" --batches 1 --samples 10 --set idx.batch_size=32
  check "... every parameter reported, the blocks' too, none over" \
    sh -c "grep -q '^9.4.bias ' '$T/out' && ! grep -q over '$T/out'"
else
  ok "# SKIP the Fashion-MNIST examples: dataset-fashion-mnist is not installed"
fi
# Every other bundled example with a backward: the optimizers' (rosenbrock,
# lstsq) and the out-of-tree model plugins (plugin, nn_plugin, loss_scale),
# built here against the source tree's headers. gan (manual optimization),
# closure and bind_lbfgs (no model plugin) have no backward to check.
# The examples of real data run on small batches, as the CNN's above:
# the MobileNet (depthwise convolutions, hardswish, global average
# pooling) and the LSTM language model.
bad=
for ex in "$LK_SRCDIR"/examples/*.ini; do
  case $ex in
  *fashion-mnist* | *gpt-jargon*) continue ;;
  *mobilenet-fmnist*) set -- --samples 4 --set idx.batch_size=8 ;;
  *text-lstm*) set -- --samples 4 --set text.batch_size=2 ;;
  *) set -- --samples 8 ;;
  esac
  "$LOOPKIT" gradcheck "$ex" --batches 1 "$@" >"$T/ex.out" 2>&1 || bad="$bad $ex"
done
check "every optimizer example passes (none of:$bad)" test -z "$bad"
for ex in plugin/quadratic nn_plugin/nnmlp loss_scale/loss_scale; do
  dir=${ex%/*} so=${ex#*/}
  mkdir -p "$T/so" && ${LK_CC:-cc} -shared -fPIC -I"$LK_SRCDIR/include" -I"$LK_BUILDDIR/include" \
    "$LK_SRCDIR/examples/$ex.c" -o "$T/so/$so.so" -lm >"$T/cc.log" 2>&1
  (cd "$LK_SRCDIR/examples/$dir" && LOOPKIT_PLUGIN_PATH="$T/so:$LOOPKIT_PLUGIN_PATH" \
    "$LOOPKIT" gradcheck "$so.ini" --batches 1 --samples 8 >"$T/out" 2>&1)
  check "examples/$ex.ini (built out of tree) passes" grep -q '^gradcheck: passed' "$T/out"
done
finish

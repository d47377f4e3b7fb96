#!/bin/sh
# ABI policy: plugins built against the frozen headers of ABI 1.2, 1.3, 1.4
# and 1.5 (tests/abi/v1.2 to v1.5) load into this loopkit and behave exactly as the
# same sources built against today's headers; a newer minor or another major is
# refused with both versions named.
. "$LK_SRCDIR/tests/cli/lib.sh"
: "${LK_ABI_DIR:?}" "${LK_BROKEN_DIR:?}"
A=$LK_ABI_DIR

expect 0 'abi: +1\.2' "inspect: sgd built against the 1.2 headers says ABI 1.2" -- inspect "$A/sgd_v12.so"
expect 0 'abi: +1\.7' "inspect: the bundled sgd says ABI 1.7" -- inspect sgd
expect 0 'abi: +1\.4' "inspect: sgd built against the 1.4 headers says ABI 1.4" -- inspect "$A/sgd_v14.so"
expect 0 'kinds: +step,backward,zero_grad,optimizer,callback' \
  "inspect: the 1.2 probe has its kinds" -- inspect "$A/probe_v12.so"

config rosen <<INI
[loop]
max_steps = 40
[plugins]
step = rosenbrock
optimizer = sgd
scheduler = step_lr
[sgd]
lr = 0.001
momentum = 0.9
nesterov = true
[step_lr]
step_size = 10
gamma = 0.5
interval = step
INI
expect 0 'trained 40 steps' "sgd (1.4 headers) trains" -- train "$T/rosen.ini" --out "$T/r13"
expect 0 'trained 40 steps' "sgd (1.2 headers) trains, driven by a scheduler" -- \
  train "$T/rosen.ini" --out "$T/r12" --set "plugins.optimizer=$A/sgd_v12.so"
"$LOOPKIT" dump "$T/r13/checkpoints/last.ckpt" >"$T/d13"
"$LOOPKIT" dump "$T/r12/checkpoints/last.ckpt" >"$T/d12"
check "... to the same bits" cmp -s "$T/d13" "$T/d12"
check "the effective config keeps the path as named, so it runs again" \
  grep -qx "optimizer = $A/sgd_v12.so" "$T/r12/config.ini"
expect 0 'trained 40 steps' "... and it does" -- train "$T/r12/config.ini" --out "$T/r12b"
check "... with the same learning rates logged" \
  sh -c "cut -d, -f1,4- '$T/r13/metrics.csv' >'$T/m13' && cut -d, -f1,4- '$T/r12/metrics.csv' >'$T/m12' && cmp -s '$T/m13' '$T/m12'"

# Every hook of ABI 1.2, on_validation_start included, in the same order.
hooks() { # NAME PROBE TRACECB
  cat >"$T/$1.ini" <<INI
[loop]
max_epochs = 2
accumulate_grad_batches = 2
[plugins]
step = $2
zero_grad = $2
optimizer = $2
data = synthetic
callbacks = $3
[synthetic]
n_train = 4
n_val = 2
batch_size = 1
[probe]
trace = $T/$1.trace
[tracecb]
trace = $T/$1.trace
INI
  "$LOOPKIT" train "$T/$1.ini" --out "$T/$1" --quiet >/dev/null 2>&1
}
hooks h14 probe tracecb
check "hooks: the 1.4 build trains" test $? -eq 0
hooks h12 "$A/probe_v12.so" "$A/tracecb_v12.so"
check "hooks: the 1.2 build trains" test $? -eq 0
check "hooks: the same calls in the same order" cmp -s "$T/h14.trace" "$T/h12.trace"

# The probe does not validate: the validation hooks with a model that does.
config val <<INI
[loop]
max_epochs = 2
[plugins]
step = linreg
optimizer = sgd
data = synthetic
callbacks = $A/tracecb_v12.so
[synthetic]
n_train = 4
n_val = 2
batch_size = 2
[tracecb]
trace = $T/val.trace
[sgd]
lr = 0.001
INI
expect 0 'trained 4 steps' "validation with the 1.2 callback" -- train "$T/val.ini" --out "$T/val"
check "on_validation_start (new in 1.2) reaches it before each validation" \
  sh -c "grep -A1 '^cb:on_train_epoch_end' '$T/val.trace' | grep -c '^cb:on_validation_start' | grep -qx 2"

# ABI 1.3 plugins: a data plugin whose ops end before 1.4's shape(), an
# optimizer without check_state. They train as the 1.4 builds do, and a
# run of them resumes.
config lin13 <<INI
[loop]
max_epochs = 2
[plugins]
step = linreg
optimizer = sgd
data = synthetic
[synthetic]
n_train = 16
batch_size = 4
[sgd]
lr = 0.05
momentum = 0.9
INI
expect 0 'trained 8 steps' "data and optimizer of ABI 1.7" -- train "$T/lin13.ini" --out "$T/run14d"
expect 0 'trained 8 steps' "data and optimizer of ABI 1.4" -- \
  train "$T/lin13.ini" --out "$T/run14f" --set "plugins.data=$A/synthetic_v14.so" \
  --set "plugins.optimizer=$A/sgd_v14.so"
"$LOOPKIT" dump "$T/run14f/checkpoints/last.ckpt" >"$T/dd14f"
expect 0 'trained 8 steps' "data (no shape) and optimizer (no check_state) of ABI 1.3" -- \
  train "$T/lin13.ini" --out "$T/run13d" --set "plugins.data=$A/synthetic_v13.so" \
  --set "plugins.optimizer=$A/sgd_v13.so"
"$LOOPKIT" dump "$T/run14d/checkpoints/last.ckpt" >"$T/dd14"
"$LOOPKIT" dump "$T/run13d/checkpoints/last.ckpt" >"$T/dd13"
check "... to the same bits" cmp -s "$T/dd14" "$T/dd13"
check "... the 1.4 builds too" cmp -s "$T/dd14" "$T/dd14f"
# A step plugin of ABI 1.5: its ops end before 1.6's evaluation_end, which
# the host does not read; it trains and validates as today's build.
expect 0 'abi: +1\.5' "inspect: linreg built against the 1.5 headers says ABI 1.5" -- inspect "$A/linreg_v15.so"
expect 0 'trained 8 steps' "a step plugin of ABI 1.5 (no evaluation_end) trains and validates" -- \
  train "$T/lin13.ini" --out "$T/run15s" --set "plugins.step=$A/linreg_v15.so" --set synthetic.n_val=8
# A step plugin of ABI 1.6: its ops end before 1.7's onnx, which the host
# does not read; it trains, and export to .onnx says the model has none.
expect 0 'abi: +1\.6' "inspect: linreg built against the 1.6 headers says ABI 1.6" -- inspect "$A/linreg_v16.so"
expect 0 'trained 8 steps' "a step plugin of ABI 1.6 (no onnx) trains and validates" -- \
  train "$T/lin13.ini" --out "$T/run16o" --set "plugins.step=$A/linreg_v16.so" --set synthetic.n_val=8
expect 2 'model linreg cannot be exported to ONNX' "... and export to .onnx refuses it (exit 2), naming it" -- \
  export "$T/run16o/checkpoints/last.ckpt" -o "$T/v16.onnx"
train_quiet() { "$LOOPKIT" train "$@" --quiet >/dev/null 2>&1; }
train_quiet "$T/lin13.ini" --out "$T/run16s" --set synthetic.n_val=8
check "... to the same bits and rows as today's build" \
  sh -c "cmp -s '$T/run15s/metrics.csv' '$T/run16s/metrics.csv'"
expect 0 'trained 12 steps' "the 1.3 run resumes (its optimizer has no check_state)" -- \
  train "$T/lin13.ini" --resume "$T/run13d/checkpoints/last.ckpt" --set loop.max_epochs=3 \
  --set "plugins.data=$A/synthetic_v13.so" --set "plugins.optimizer=$A/sgd_v13.so"

expect 2 'built for loopkit plugin ABI 1\.999; this loopkit has ABI 1\.7' \
  "a newer minor is refused, both versions named" -- inspect "$LK_BROKEN_DIR/newminor.so"
expect 2 'built for loopkit plugin ABI 99\.3; this loopkit has ABI 1\.7' \
  "another major is refused, both versions named" -- inspect "$LK_BROKEN_DIR/badabi.so"
# predict_step came with 1.4: a 1.2 step plugin's ops end before it, and
# what follows its table in memory is never taken for one.
config predict12 <<INI
[loop]
max_steps = 1
[plugins]
step = $A/probe_v12.so
optimizer = sgd
[sgd]
lr = 0.001
INI
"$LOOPKIT" train "$T/predict12.ini" --out "$T/p12" --quiet >/dev/null 2>&1
expect 2 'plugin probe \(the step\) has no predict_step \(ABI 1.4\)' \
  "generate: a 1.2 step plugin has no predict_step" \
  -- generate "$T/predict12.ini" --ckpt "$T/p12/checkpoints/last.ckpt"
finish

#!/bin/sh
# The precision kind (ABI 1.3): backward gets the loss scale, the gradients
# are unscaled once per optimizer step after the last backward of the
# window, and a step whose gradients overflowed is skipped: the optimizer
# gets NaN from the closure and the parameters stay as they were, while
# the loss is still logged. The scaler test plugin records its calls in the
# probe model's trace.
. "$LK_SRCDIR/tests/cli/lib.sh"

# cfg NAME LOOP_KEYS PLUGIN_KEYS SCALER_KEYS: a probe run writing $T/NAME.trace.
cfg() {
  cat >"$T/$1.ini" <<INI
[loop]
max_steps = 3
$2
[plugins]
step = probe
zero_grad = probe
optimizer = probe
$3
[probe]
w0 = 1
trace = $T/$1.trace
[scaler]
trace = $T/$1.trace
$4
INI
}

cfg plain "" "" ""
sed -i '/^\[scaler\]/,$d' "$T/plain.ini"
"$LOOPKIT" train "$T/plain.ini" --out "$T/plain" --quiet >/dev/null 2>&1
check "without precision: trains" test $? -eq 0

cfg scaled "" "precision = scaler" "scale = 1024"
"$LOOPKIT" train "$T/scaled.ini" --out "$T/scaled" --quiet >"$T/out" 2>&1
check "with precision = scaler: trains" test $? -eq 0
check "backward gets the loss scale" grep -q "^backward scale=1024$" "$T/scaled.trace"
check "loss_scale just before backward, unscale just after it, before on_after_backward" \
  sh -c "grep -A3 '^precision:loss_scale' '$T/scaled.trace' | head -4 | tr '\n' ' ' |
    grep -q '^precision:loss_scale backward scale=1024 precision:unscale g0=1024 model:on_after_backward'"
check "one unscale per optimizer step" \
  test "$(grep -c '^precision:unscale' "$T/scaled.trace")" -eq 3
check "a power-of-two scale changes no bit of the parameters" \
  sh -c "'$LOOPKIT' dump '$T/plain/checkpoints/last.ckpt' >'$T/d1' &&
    '$LOOPKIT' dump '$T/scaled/checkpoints/last.ckpt' >'$T/d2' && cmp -s '$T/d1' '$T/d2'"
check "the effective config names the precision plugin" \
  grep -q "^precision = scaler" "$T/scaled/config.ini"

cfg skip "" "precision = scaler" "skip_at = 0,1,2"
"$LOOPKIT" train "$T/skip.ini" --out "$T/skip" --quiet >"$T/out" 2>&1
check "overflowing steps: the run goes on" test $? -eq 0
check "the optimizer gets NaN from the closure" \
  test "$(grep -c '^closure -> nan' "$T/skip.trace")" -eq 3
check "and takes no step" sh -c "! grep -q '^optimizer_step' '$T/skip.trace'"
check "the parameters are untouched" \
  sh -c "'$LOOPKIT' dump '$T/skip/checkpoints/last.ckpt' | awk '{ if (\$2 != 1) bad = 1 } END { exit bad }'"
check "the loss of a skipped step is still logged" \
  sh -c "awk -F, 'NR > 1 && \$3 == 1 { n++ } END { exit n != 3 }' '$T/skip/metrics.csv'"

cfg skip1 "" "precision = scaler" "skip_at = 1"
"$LOOPKIT" train "$T/skip1.ini" --out "$T/skip1" --quiet >/dev/null 2>&1
check "one skipped step of three: two updates" \
  test "$(grep -c '^optimizer_step' "$T/skip1.trace")" -eq 2

# Accumulation: 4 batches, windows of 2: backward scaled 4 times, two
# unscales, each after the window's last backward.
cat >"$T/acc.ini" <<INI
[loop]
max_epochs = 1
accumulate_grad_batches = 2
[plugins]
step = probe
zero_grad = probe
optimizer = probe
data = synthetic
precision = scaler
[synthetic]
n_train = 4
n_val = 0
batch_size = 1
[probe]
trace = $T/acc.trace
[scaler]
trace = $T/acc.trace
INI
"$LOOPKIT" train "$T/acc.ini" --out "$T/acc" --quiet >/dev/null 2>&1
check "accumulation: trains" test $? -eq 0
check "accumulation: every backward is scaled (1/2 x 1024)" \
  test "$(grep -c '^backward scale=512$' "$T/acc.trace")" -eq 4
check "accumulation: one unscale per window, after its last backward" \
  sh -c "grep -e '^backward' -e '^precision:unscale' '$T/acc.trace' | cut -d' ' -f1 | tr '\n' ' ' |
    grep -q '^backward backward precision:unscale backward backward precision:unscale $'"

# Manual optimization, through the host calls: the step plugin (multi)
# accumulates two batches, clips each of two optimizers by norm and steps
# them; backwards are scaled, each optimizer's gradients unscaled once, when
# it clips them.
cat >"$T/manual.ini" <<INI
[loop]
max_steps = 8
manual_optimization = true
[plugins]
step = multi
optimizer = a:sgd, b:adam
[multi]
manual = true
per_optimizer = true
accumulate = 2
clip = 0.5
[a]
params = w, b
lr = 0.05
momentum = 0.9
[b]
lr = 0.01
INI
"$LOOPKIT" train "$T/manual.ini" --out "$T/mplain" --quiet >/dev/null 2>&1
check "manual: the plain run trains" test $? -eq 0
"$LOOPKIT" train "$T/manual.ini" --out "$T/mscaled" --quiet \
  --set plugins.precision=scaler --set "scaler.trace=$T/manual.trace" >"$T/out" 2>&1
check "manual with a precision plugin trains" test $? -eq 0
check "... every backward scaled (1/2 x 1024)" \
  test "$(grep -c '^precision:loss_scale' "$T/manual.trace")" -eq 8
check "... each optimizer's gradients unscaled once per window (4 x 2)" \
  test "$(grep -c '^precision:unscale' "$T/manual.trace")" -eq 8
check "... to the same bits as without it (a power-of-two scale)" \
  sh -c "'$LOOPKIT' dump '$T/mplain/checkpoints/last.ckpt' >'$T/m1' &&
    '$LOOPKIT' dump '$T/mscaled/checkpoints/last.ckpt' >'$T/m2' && cmp -s '$T/m1' '$T/m2'"
"$LOOPKIT" train "$T/manual.ini" --out "$T/mskip" --quiet \
  --set plugins.precision=scaler --set scaler.skip_at=0,2,4,6 >"$T/out" 2>&1
check "manual: an overflow skips that optimizer's step only (a never steps)" \
  sh -c "'$LOOPKIT' dump '$T/mskip/checkpoints/last.ckpt' >'$T/m3' &&
    grep -qx 'w\[0\] 0.10000000000000001' '$T/m3' && grep -qx 'b\[0\] 0.050000000000000003' '$T/m3' &&
    ! grep -qx 'u\[0\] 0.20000000000000001' '$T/m3'"
check "... and the run counts its 8 steps" grep -q 'trained 8 steps' "$T/out"

cfg notprec "" "precision = sgd" ""
sed -i '/^\[scaler\]/,$d' "$T/notprec.ini"
"$LOOPKIT" train "$T/notprec.ini" --out "$T/notprec" >"$T/out" 2>&1
st=$?; check "a plugin that is no precision: exit 2" test $st -eq 2
check "... named with its kinds" grep -q "plugin sgd (.*) cannot be the precision: it implements optimizer" "$T/out"

cfg zero "" "precision = scaler" "scale = 0"
"$LOOPKIT" train "$T/zero.ini" --out "$T/zero" >"$T/out" 2>&1
st=$?; check "a loss scale of 0: the run fails" test $st -eq 1
check "... naming the plugin and the value" grep -q "loss_scale of precision scaler is 0" "$T/out"

# A plugin's own LK_ENONFINITE failure keeps its message (it was once
# taken for the closure's own non-finite check and dropped).
cfg failing "" "precision = scaler" "fail = true"
"$LOOPKIT" train "$T/failing.ini" --out "$T/failing" >"$T/out" 2>&1
st=$?; check "a failing unscale_gradients fails the run" test $st -eq 1
check "... with the plugin's message" grep -q "unscale_gradients of precision scaler.*gradients are not finite (test)" "$T/out"

finish

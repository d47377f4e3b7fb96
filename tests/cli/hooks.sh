#!/bin/sh
# Hook order: every hook of a batch, recorded by the probe model (model:)
# and the tracecb callback (cb:), in automatic optimization, with gradient
# accumulation and in manual optimization, against the order of one batch (README.md, docs/architecture.md):
#   on_train_batch_start, training_step, on_before_zero_grad, zero_grad,
#   on_before_backward, backward, on_after_backward,
#   on_before_optimizer_step, clipping, the parameter update,
#   on_after_optimizer_step, on_train_batch_end
# with callbacks before the model; and the epoch and validation hooks.
. "$LK_SRCDIR/tests/cli/lib.sh"

# run NAME LOOP_KEYS PROBE_KEYS N_TRAIN: trains probe on N_TRAIN batches of
# one sample, writing every call and hook to $T/NAME.trace.
run() {
  cat >"$T/$1.ini" <<INI
[loop]
max_epochs = 1
$2
[plugins]
step = probe
zero_grad = probe
optimizer = probe
data = synthetic
callbacks = tracecb
[synthetic]
n_train = $4
n_val = 0
batch_size = 1
[probe]
trace = $T/$1.trace
$3
[tracecb]
trace = $T/$1.trace
INI
  "$LOOPKIT" train "$T/$1.ini" --out "$T/$1" --quiet >/dev/null 2>&1
}

# The calls a batch makes, in the documented order; callbacks before the model.
batch_hooks() { # $1 = batch index, $2 = "zero" to include zero_grad, $3 = "step"
  printf 'cb:on_train_batch_start\nmodel:on_train_batch_start\ntraining_step batch=%s\n' "$1"
  if [ "$2" = zero ]; then
    printf 'cb:on_before_zero_grad\nmodel:on_before_zero_grad\nzero_grad\n'
  fi
  printf 'cb:on_before_backward\nmodel:on_before_backward\nbackward scale=%s\n' "$4"
  printf 'cb:on_after_backward\nmodel:on_after_backward\n'
  if [ "$3" = step ]; then
    printf 'cb:on_before_optimizer_step\nmodel:on_before_optimizer_step\n'
    [ -n "${5:-}" ] && printf 'closure -> %s\n' "$5"
    printf 'optimizer_step\ncb:on_after_optimizer_step\nmodel:on_after_optimizer_step\n'
  fi
  printf 'cb:on_train_batch_end\nmodel:on_train_batch_end\n'
}

# Automatic optimization, two batches, clipping on.
run auto "gradient_clip_val = 100" "" 2
{
  printf 'cb:on_train_start\ncb:on_train_epoch_start\n'
  batch_hooks 0 zero step 1 1
  batch_hooks 1 zero step 1 0.81000000000000005
  printf 'cb:on_train_epoch_end\ncb:on_train_end\n'
} >"$T/auto.want"
check "automatic optimization: every hook of every batch in the documented order" \
  diff "$T/auto.want" "$T/auto.trace"

# The hooks alone, without callback/model prefixes, are exactly the README's
# list (the update is the probe optimizer's "optimizer_step" line).
cat >"$T/design.want" <<'EOF'
on_train_batch_start
training_step
on_before_zero_grad
zero_grad
on_before_backward
backward
on_after_backward
on_before_optimizer_step
optimizer_step
on_after_optimizer_step
on_train_batch_end
EOF
sed -n '3,21p' "$T/auto.trace" | sed -e 's/^cb://' -e 's/^model://' -e 's/ .*//' |
  grep -v '^closure$' | uniq >"$T/design.got"
check "one batch's hooks are the list in the README" \
  diff "$T/design.want" "$T/design.got"

# Accumulation over 2 batches, 3 batches in the epoch: zero_grad opens each
# window, the optimizer steps at the window's end and at the epoch's end.
run accum "accumulate_grad_batches = 2" "" 3
{
  printf 'cb:on_train_start\ncb:on_train_epoch_start\n'
  batch_hooks 0 zero nostep 0.5
  batch_hooks 1 nozero step 0.5 0.5
  batch_hooks 2 zero step 0.5 0.40500000000000003
  printf 'cb:on_train_epoch_end\ncb:on_train_end\n'
} >"$T/accum.want"
check "accumulation: hooks per batch, zero_grad per window, steps at window ends" \
  diff "$T/accum.want" "$T/accum.trace"

# Manual optimization: the step plugin calls zero_grad, backward and the
# optimizer through the host; the same hooks fire around them.
run manual "manual_optimization = true" "manual = true" 2
{
  printf 'cb:on_train_start\ncb:on_train_epoch_start\n'
  batch_hooks 0 zero step 1
  batch_hooks 1 zero step 1
  printf 'cb:on_train_epoch_end\ncb:on_train_end\n'
} >"$T/manual.want"
check "manual optimization: the same hooks around the host's calls" \
  diff "$T/manual.want" "$T/manual.trace"

# Epoch and validation hooks: on_validation_start and on_validation_end
# bracket each validation, after on_train_epoch_end.
cat >"$T/val.ini" <<INI
[loop]
max_epochs = 2
[plugins]
step = linreg
optimizer = sgd
data = synthetic
callbacks = tracecb
[synthetic]
n_train = 4
n_val = 4
n_test = 0
batch_size = 4
[tracecb]
trace = $T/val.trace
[sgd]
lr = 0.001
INI
"$LOOPKIT" train "$T/val.ini" --out "$T/val" --quiet >/dev/null 2>&1
epoch='cb:on_train_epoch_start
cb:on_train_batch_start
cb:on_before_zero_grad
cb:on_before_backward
cb:on_after_backward
cb:on_before_optimizer_step
cb:on_after_optimizer_step
cb:on_train_batch_end
cb:on_train_epoch_end
cb:on_validation_start
cb:on_validation_end'
printf 'cb:on_train_start\n%s\n%s\ncb:on_train_end\n' "$epoch" "$epoch" >"$T/val.want"
check "epochs: validation hooks bracket each validation, after on_train_epoch_end" \
  diff "$T/val.want" "$T/val.trace"

# No validation split: neither validation hook runs.
sed -e 's/^n_val = 4/n_val = 0/' -e "s|val.trace|noval.trace|" "$T/val.ini" >"$T/noval.ini"
"$LOOPKIT" train "$T/noval.ini" --out "$T/noval" --quiet >/dev/null 2>&1
check "no validation split: no on_validation_start or on_validation_end" \
  test "$(grep -c on_validation "$T/noval.trace")" -eq 0
check "no validation split: the epochs still ran" \
  test "$(grep -c on_train_epoch_end "$T/noval.trace")" -eq 2

finish

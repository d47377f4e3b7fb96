#!/bin/sh
# loopkit train --resume RUN_DIR: a run goes on with its own config.ini,
# overrides included; the command printed when a run stops is exactly the
# one that resumes it; a --set on a resume changes only what it names and
# is recorded in config.ini. And --set can swap a plugin (the old one's
# section is then noted unused) or take an optional role out with none or
# an empty value. The killer profiler (tests/plugins) sends the signal at
# a chosen optimizer step, from LK_KILL, so that the interrupted run and
# the uninterrupted one share a config.
. "$LK_SRCDIR/tests/cli/lib.sh"
cd "$T" || exit 1

# equal REF DIR: the parameters, metrics.csv and last.ckpt of two runs.
equal() {
  "$LOOPKIT" dump "$1/checkpoints/last.ckpt" >"$T/eq1" 2>&1 &&
    "$LOOPKIT" dump "$2/checkpoints/last.ckpt" >"$T/eq2" 2>&1 &&
    cmp -s "$T/eq1" "$T/eq2" && cmp -s "$1/metrics.csv" "$2/metrics.csv" &&
    cmp -s "$1/checkpoints/last.ckpt" "$2/checkpoints/last.ckpt"
}
# hint FILE: the command a stopped run printed to resume it.
hint() { sed -n 's/^loopkit: resume with: //p' "$1"; }
# interrupt STEP ARGS...: loopkit train ARGS, SIGINT at optimizer step STEP.
interrupt() {
  step=$1
  shift
  LK_KILL=optimizer_step:$step:0:INT "$LOOPKIT" train "$@" >"$T/int.out" 2>&1
}

# 16 steps an epoch; the file says 10 epochs, the command line 3.
config lin <<INI
[loop]
max_epochs = 10
[plugins]
step = linreg
optimizer = adam
data = synthetic
profiler = killer
[synthetic]
n_train = 64
n_val = 8
n_test = 8
batch_size = 4
[adam]
lr = 0.01
INI
"$LOOPKIT" train "$T/lin.ini" --set loop.max_epochs=3 --out "$T/ref" --quiet >/dev/null 2>&1
check "the reference run: 3 epochs" grep -qx 'max_epochs = 3' "$T/ref/config.ini"

# ---- 1. the hint resumes the run as it was started ----

interrupt 20 "$T/lin.ini" --set loop.max_epochs=3
check "SIGINT: status 130" test $? -eq 130
check "the hint is the run directory alone: loopkit train --resume runs/lin-1" \
  test "$(hint "$T/int.out")" = "loopkit train --resume runs/lin-1"
# The file the run started from changes: the run is not its business.
sed 's/^lr = 0.01$/lr = 0.5/' "$T/lin.ini" >"$T/lin.tmp" && mv "$T/lin.tmp" "$T/lin.ini"
cp runs/lin-1/config.ini "$T/lin-1.config"
cmd=$(hint "$T/int.out")
sh -c "$LOOPKIT ${cmd#loopkit }" >"$T/hint.out" 2>&1
check "the hint, run as printed, trains 3 epochs, not the file's 10" \
  grep -q 'trained 48 steps (3 epochs)' "$T/hint.out"
check "... and ends as the uninterrupted run, bit for bit" equal "$T/ref" runs/lin-1
check "... and leaves config.ini as it was (nothing overridden)" \
  cmp -s "$T/lin-1.config" runs/lin-1/config.ini

# A checkpoint of the run stands for it too, from anywhere.
interrupt 20 "$T/ref/config.ini" --out "$T/ck"
expect 0 'trained 48 steps \(3 epochs\)' "--resume RUN_DIR/checkpoints/last.ckpt, no config" \
  -- train --resume "$T/ck/checkpoints/last.ckpt" --quiet
check "... ends as the uninterrupted run" equal "$T/ref" "$T/ck"
interrupt 20 "$T/ref/config.ini" --out "$T/inside"
(cd "$T/inside/checkpoints" && "$LOOPKIT" train --resume last.ckpt --quiet) >"$T/out" 2>&1
check "--resume last.ckpt from inside checkpoints/ (the run's config.ini found)" \
  grep -q 'trained 48 steps (3 epochs)' "$T/out"
check "... ends as the uninterrupted run" equal "$T/ref" "$T/inside"
interrupt 20 "$T/ref/config.ini" --out "$T/slash"
expect 0 'trained 48 steps \(3 epochs\)' "--resume RUN_DIR/ with a trailing slash" \
  -- train --resume "$T/slash/" --quiet
# An older checkpoint of the run: a new run directory named after the run.
interrupt 20 "$T/ref/config.ini" --set loop.checkpoint_every_n_steps=8 --set loop.keep_last=5 --out "$T/old"
rm -rf runs
expect 0 'in a new run directory, runs/old-1' \
  "an older checkpoint of the run: a new run directory, named after the run's" \
  -- train --resume "$T/old/checkpoints/step-8.ckpt"
check "... whose config.ini says where it came from" \
  grep -q "^# resumed .* from $T/old/checkpoints/step-8.ckpt at epoch 0, step 8$" runs/old-1/config.ini

# ---- 2. a --set on a resume: only what it names, recorded ----

interrupt 20 "$T/ref/config.ini" --out "$T/more"
expect 0 'trained 64 steps \(4 epochs\)' "--resume RUN_DIR --set loop.max_epochs=4 trains 4 epochs" \
  -- train --resume "$T/more" --set loop.max_epochs=4 --quiet
check "config.ini says 4 epochs now" grep -qx 'max_epochs = 4' "$T/more/config.ini"
check "... and records the --set, with the date and where the run was" \
  grep -Eqx '# resumed [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8} UTC at epoch 1, step 20 with --set loop.max_epochs=4' \
  "$T/more/config.ini"
check "... and the rest is as it was" \
  sh -c "grep -v -e '^max_epochs = ' -e '^# resumed ' -e '^\$' '$T/more/config.ini' >'$T/m1' &&
    grep -v -e '^max_epochs = ' -e '^\$' '$T/ref/config.ini' >'$T/m2' && cmp -s '$T/m1' '$T/m2'"
"$LOOPKIT" train "$T/ref/config.ini" --set loop.max_epochs=4 --out "$T/ref4" --quiet >/dev/null 2>&1
check "... and the run equals one trained 4 epochs from the start" equal "$T/ref4" "$T/more"
expect 0 'the run was complete already: 64 steps \(4 epochs\)' \
  "resumed again without --set: the recorded config holds" -- train --resume "$T/more"
check "... which adds no record" test "$(grep -c '^# resumed ' "$T/more/config.ini")" -eq 1
expect 0 'trained 80 steps \(5 epochs\)' "a second --set on a resume" \
  -- train --resume "$T/more" --set loop.max_epochs=5 --quiet
check "... is recorded after the first" \
  sh -c "grep '^# resumed ' '$T/more/config.ini' | sed -n 2p | grep -q 'with --set loop.max_epochs=5\$'"
check "... and the config.ini it leaves reads" test "$(grep -c '^max_epochs = ' "$T/more/config.ini")" -eq 1

# The old form, CONFIG --resume CKPT, still works; a config other than
# the run's own makes config.ini follow it, so the hint stays exact.
interrupt 20 "$T/ref/config.ini" --out "$T/other"
sed 's/^max_epochs = 3$/max_epochs = 4/' "$T/ref/config.ini" >"$T/four.ini"
expect 0 'trained 64 steps \(4 epochs\)' "loopkit train CONFIG --resume RUN_DIR/checkpoints/last.ckpt" \
  -- train "$T/four.ini" --resume "$T/other/checkpoints/last.ckpt" --quiet
check "... config.ini follows the config given, and says so" \
  sh -c "grep -qx 'max_epochs = 4' '$T/other/config.ini' &&
    grep -q '^# resumed .* from config $T/four.ini at epoch 1, step 20\$' '$T/other/config.ini'"
check "... and equals the run trained 4 epochs" equal "$T/ref4" "$T/other"

# The hint quotes what a shell would split.
interrupt 20 "$T/ref/config.ini" --out "$T/a b"
check "a run directory with a space: the hint quotes it" \
  test "$(hint "$T/int.out")" = "loopkit train --resume '$T/a b'"
cmd=$(hint "$T/int.out")
sh -c "$LOOPKIT ${cmd#loopkit } --quiet" >"$T/out" 2>&1
check "... and runs as printed" equal "$T/ref" "$T/a b"

# A run that fails after a checkpoint says how to go on from it.
config fail <<INI
[loop]
max_steps = 10
checkpoint_every_n_steps = 2
[plugins]
step = probe
optimizer = sgd
[probe]
fail_at = 6
[sgd]
lr = 0.001
INI
expect 1 "loopkit: resume with: loopkit train --resume $T/fail" \
  "a failed run with a checkpoint prints the resume command" -- train "$T/fail.ini" --out "$T/fail"

# What --resume cannot resume, said before anything is touched.
mkdir -p "$T/empty"
expect 2 "--resume $T/empty: $T/empty has no checkpoint to resume" \
  "a directory without checkpoints/last.ckpt is refused" -- train --resume "$T/empty"
cp "$T/ref/checkpoints/last.ckpt" "$T/loose.ckpt"
expect 2 "--resume $T/loose.ckpt: no config: the checkpoint is not in a run directory's checkpoints/; give the config it was trained with" \
  "a checkpoint outside a run directory, no config: refused, saying what to give" \
  -- train --resume "$T/loose.ckpt"
mkdir -p "$T/noconf/checkpoints" && cp "$T/loose.ckpt" "$T/noconf/checkpoints/last.ckpt"
expect 2 "$T/noconf is not a run directory \(no config.ini" \
  "a checkpoints/ without a config.ini beside it is refused" -- train --resume "$T/noconf"

# ---- 3. --set swaps and removes plugins ----

config swap <<INI
[loop]
max_epochs = 1
[plugins]
step = linreg
optimizer = adam
data = synthetic
profiler = trace
callbacks = ema
[synthetic]
n_train = 16
n_val = 0
batch_size = 4
[adam]
lr = 0.01
[trace]
file = t.json
INI
expect 0 "note: $T/swap.ini:13: section \[adam\] is unused: --set plugins.optimizer=sgd replaced optimizer = adam" \
  "--set plugins.optimizer=sgd swaps the optimizer; [adam] is noted unused" \
  -- train "$T/swap.ini" --set plugins.optimizer=sgd --set sgd.lr=0.01 --out "$T/sgd"
check "... the run used sgd" grep -qx 'optimizer = sgd' "$T/sgd/config.ini"
check "... and its config.ini has no [adam]" sh -c "! grep -q '^\[adam\]' '$T/sgd/config.ini'"
expect 2 "unknown section \[adm\]" "an unknown section is still an error beside a swap" \
  -- train "$T/swap.ini" --set plugins.optimizer=sgd --set sgd.lr=0.01 --set adm.lr=1 --out "$T/adm"
for how in none ""; do
  expect 0 "note: $T/swap.ini:15: section \[trace\] is unused: --set plugins.profiler=$how replaced profiler = trace" \
    "--set plugins.profiler=$how removes the profiler, [trace] noted unused" \
    -- train "$T/swap.ini" --set "plugins.profiler=$how" --out "$T/np$how"
  check "... no trace written, none in config.ini" \
    sh -c "[ ! -e '$T/np$how/t.json' ] && ! grep -q '^profiler' '$T/np$how/config.ini'"
done
expect 0 "trained" "--set plugins.callbacks=none takes the callbacks out" \
  -- train "$T/swap.ini" --set plugins.callbacks=none --out "$T/nocb"
check "... none in config.ini" sh -c "! grep -q '^callbacks' '$T/nocb/config.ini'"
for role in step backward zero_grad optimizer; do
  expect 2 "--set plugins.$role=none: \[plugins\] $role cannot be none: the role is required" \
    "none for the required role $role is refused, naming it" \
    -- train "$T/swap.ini" --set "plugins.$role=none" --out "$T/req-$role"
done
expect 2 "--set plugins.optimizer=: \[plugins\] optimizer is required unless manual_optimization" \
  "an empty optimizer names the --set that removed it" \
  -- train "$T/swap.ini" --set plugins.optimizer= --out "$T/req-empty"
expect 1 "training_step of plugin probe: no optimizer plugin is configured" \
  "optimizer = none is taken with manual_optimization = true (the step then finds none)" \
  -- train "$T/swap.ini" --set loop.manual_optimization=true --set plugins.optimizer=none \
  --set plugins.step=probe --set probe.manual=true --set plugins.data=none \
  --set loop.max_steps=2 --set plugins.callbacks= --out "$T/manual"

# A swap on a resume: the run's config.ini keeps [adam]; sgd's state is
# not adam's, so the checkpoint is refused, naming it.
interrupt 20 "$T/ref/config.ini" --out "$T/swapres"
expect 2 "section \[adam\] is unused: --set plugins.optimizer=sgd replaced optimizer = adam" \
  "a swap on a resume notes the run's [adam] unused" \
  -- train --resume "$T/swapres" --set plugins.optimizer=sgd --set sgd.lr=0.01
finish

#!/bin/sh
# Nothing silently ignored, nothing left unfinished, nothing clobbered
# (issue 23, items 3, 5 and 6): a --set on a resume takes effect from the
# resumed step or is refused, and a resume that fails leaves config.ini as
# it was; a run resumed in another directory finds the checkpoint
# callback's kept files and can always finish; a checkpoint filename
# pattern that can name another owner's file is refused before anything
# is written. The killer profiler (tests/plugins) stops a run at a chosen
# action, from LK_KILL, so that a killed run and the uninterrupted one
# share a config.
. "$LK_SRCDIR/tests/cli/lib.sh"
cd "$T" || exit 1

same() {
  [ "$1" = "$2" ] && return 0
  echo "# got [$1], expected [$2]"
  return 1
}
train() { "$LOOPKIT" train "$@" --quiet >"$T/train.out" 2>&1; }
# params A B: the parameters of two checkpoints are equal.
params() {
  "$LOOPKIT" dump "$1" >"$T/p1" 2>&1 && "$LOOPKIT" dump "$2" >"$T/p2" 2>&1 &&
    cmp -s "$T/p1" "$T/p2"
}
# equal REF DIR: the parameters, metrics.csv and last.ckpt of two runs.
equal() {
  params "$1/checkpoints/last.ckpt" "$2/checkpoints/last.ckpt" &&
    cmp -s "$1/metrics.csv" "$2/metrics.csv" &&
    cmp -s "$1/checkpoints/last.ckpt" "$2/checkpoints/last.ckpt"
}

# 4 steps an epoch; the loss falls, so the last epoch is among the best.
config lin <<INI
[loop]
max_epochs = 4
[plugins]
step = linreg
optimizer = sgd
data = synthetic
callbacks = checkpoint
profiler = killer
[synthetic]
n_train = 16
n_val = 8
n_test = 8
batch_size = 4
[sgd]
lr = 0.05
momentum = 0.9
[checkpoint]
save_top_k = 2
INI

# ---- item 3: a --set on a resume is never silently ignored ----

# The rate halved at step 8 by a --set on the resume is the rate a
# multistep scheduler halves there: the same weights, bit for bit.
train "$T/lin.ini" --out "$T/ms" --set plugins.scheduler=multistep \
  --set multistep.milestones=2 --set multistep.gamma=0.5
train "$T/lin.ini" --out "$T/lr" --set loop.max_epochs=2
cp -r "$T/lr" "$T/plain"
expect 0 "--set sgd.lr=0.025 takes effect from step 8: state sgd.lr = 0.025 \(the checkpoint had 0.05\)" \
  "--set sgd.lr on a resume takes effect from the resumed step, and says so" \
  -- train --resume "$T/lr" --set loop.max_epochs=4 --set sgd.lr=0.025
check "... the run equals one whose rate a scheduler halved at step 8" \
  params "$T/ms/checkpoints/last.ckpt" "$T/lr/checkpoints/last.ckpt"
train --resume "$T/plain" --set loop.max_epochs=4
check "... and not one resumed without it" \
  sh -c "! cmp -s '$T/plain/checkpoints/last.ckpt' '$T/lr/checkpoints/last.ckpt'"
check "... config.ini records what it changed" \
  grep -q "^# resumed .* with --set loop.max_epochs=4 --set sgd.lr=0.025; from step 8: state sgd.lr = 0.025 (the checkpoint had 0.05)\$" \
  "$T/lr/config.ini"
check "... and holds the new rate, which a plain resume goes on with" grep -qx 'lr = 0.025' "$T/lr/config.ini"

train "$T/lin.ini" --out "$T/mom" --set loop.max_epochs=2
expect 0 "--set sgd.momentum=0.5 takes effect from step 8: state sgd.momentum = 0.5 \(the checkpoint had 0.9\)" \
  "--set sgd.momentum on a resume takes effect too" \
  -- train --resume "$T/mom" --set loop.max_epochs=4 --set sgd.momentum=0.5
check "... the weights are not those of a resume without it" \
  sh -c "! cmp -s '$T/plain/checkpoints/last.ckpt' '$T/mom/checkpoints/last.ckpt'"

# adam's beta1 comes from betas; a scheduler's base_lr from the
# optimizer's lr: found, whichever plugin holds them.
train "$T/lin.ini" --out "$T/adam" --set loop.max_epochs=2 --set plugins.optimizer=adam \
  --set plugins.scheduler=step_lr --set step_lr.step_size=10
expect 0 "--set adam.betas=0.5,0.999 takes effect from step 8: state adam.beta1 = 0.5 \(the checkpoint had 0.9\)" \
  "--set adam.betas on a resume: beta1, held as state, takes the new value" \
  -- train --resume "$T/adam" --set loop.max_epochs=3 --set adam.betas=0.5,0.999
expect 0 "--set adam.lr=0.002 takes effect from step 12: state adam.lr = 0.002 \(the checkpoint had 0.001\); state step_lr.base_lr = 0.002 \(the checkpoint had 0.001\)" \
  "--set adam.lr under a scheduler that has not changed the rate: the rate and the scheduler's base_lr" \
  -- train --resume "$T/adam" --set loop.max_epochs=4 --set adam.lr=0.002

# A scheduler drives the rate: a new one has no place in its schedule.
train "$T/lin.ini" --out "$T/sched" --set loop.max_epochs=2 --set plugins.scheduler=step_lr \
  --set step_lr.step_size=1 --set step_lr.interval=step
cp "$T/sched/config.ini" "$T/sched.config"
cp "$T/sched/metrics.csv" "$T/sched.metrics"
expect 2 "$T/sched/checkpoints/last.ckpt: --set sgd.lr=1 on a resume: state sgd.lr is [0-9.e-]+ in the checkpoint, not the 0.05 the run started with: training has changed it \(a scheduler drives it" \
  "--set sgd.lr on a resume when a scheduler has changed the rate: refused, naming the --set and the state" \
  -- train --resume "$T/sched" --set loop.max_epochs=3 --set sgd.lr=1
check "... config.ini is as it was" cmp -s "$T/sched.config" "$T/sched/config.ini"
check "... and so is metrics.csv" cmp -s "$T/sched.metrics" "$T/sched/metrics.csv"
expect 2 "--set loop.seed=7 on a resume: the run's generator goes on from the checkpoint's state, drawn from seed 0" \
  "--set loop.seed on a resume is refused: the generator's state is the checkpoint's" \
  -- train --resume "$T/sched" --set loop.seed=7

# A resume refused before training (a checkpoint beyond this config's
# batches, found at the first epoch) leaves config.ini as it was: the
# next plain resume trains as if it never happened.
train "$T/lin.ini" --out "$T/full" --set loop.checkpoint_every_n_steps=2
LK_KILL=checkpoint_save/end:3 train "$T/lin.ini" --out "$T/kill" --set loop.checkpoint_every_n_steps=2
cp "$T/kill/config.ini" "$T/kill.config"
expect 2 "the checkpoint is at batch 2 of epoch 1, but the epoch has 1 batches here" \
  "a resume whose --set does not fit the checkpoint fails before training (exit 2)" \
  -- train --resume "$T/kill" --set synthetic.batch_size=16
check "... and leaves config.ini byte for byte as it was" cmp -s "$T/kill.config" "$T/kill/config.ini"
expect 0 "trained 16 steps" "the next resume, without --set, trains" -- train --resume "$T/kill" --quiet
check "... as if the failed one never happened: equal to the uninterrupted run" equal "$T/full" "$T/kill"

# ---- item 5: a run resumed in another directory can always finish ----

# The checkpoint callback's kept list is state: resumed in a new run
# directory, it carries the files the list names there, and best.ckpt
# (the best one's: the other run's best.ckpt may be from after the
# checkpoint), so the test on best.ckpt finds it.
train "$T/lin.ini" --out "$T/best" --set loop.test_ckpt=best
check "the reference run keeps epochs 1 and 3 (val_loss 1.97, 0.80; epoch 0's 2.03 evicted)" \
  same "$(ls "$T/best/checkpoints" | tr '\n' ' ')" "best.ckpt epoch=1-step=8.ckpt epoch=3-step=16.ckpt last.ckpt "
expect 0 "trained 16 steps" \
  "its last kept checkpoint resumed in a new directory, test_ckpt = best: the run finishes" \
  -- train --resume "$T/best/checkpoints/epoch=3-step=16.ckpt" --out "$T/more"
check "... and ends as the uninterrupted one, its test (on best.ckpt) included" equal "$T/best" "$T/more"
check "... its directory holds the kept files and best.ckpt, as the uninterrupted run's" \
  sh -c "cmp -s '$T/best/checkpoints/best.ckpt' '$T/more/checkpoints/best.ckpt' &&
    cmp -s '$T/best/checkpoints/epoch=1-step=8.ckpt' '$T/more/checkpoints/epoch=1-step=8.ckpt'"
expect 0 "the run was complete already" "... and the new directory resumes (its last.ckpt was written)" \
  -- train --resume "$T/more"
# An older kept checkpoint: epoch 0's file, kept with it then, is gone
# from the run (evicted at epoch 3), said; best.ckpt is epoch 1's, not the
# run's own (epoch 3's, after the checkpoint).
train "$T/lin.ini" --out "$T/ref2" --set loop.test_ckpt=best --set loop.max_epochs=2
expect 0 "kept checkpoint $T/best/checkpoints/epoch=0-step=4.ckpt of the run this one continues is not carried to $T/older/checkpoints/epoch=0-step=4.ckpt \(No such file or directory\)" \
  "an older kept checkpoint resumed elsewhere: a kept file the run no longer has is said" \
  -- train --resume "$T/best/checkpoints/epoch=1-step=8.ckpt" --out "$T/older" --set loop.max_epochs=2
check "... and its test is on epoch 1's best, as the 2-epoch run's" equal "$T/ref2" "$T/older"
cp "$T/best/checkpoints/epoch=3-step=16.ckpt" "$T/loose.ckpt"
expect 0 "test_ckpt = best: no $T/less/checkpoints/best.ckpt \(its checkpoint callback found no best checkpoint of the run it continues, $T/loose.ckpt, to carry\): testing the trained model" \
  "a checkpoint in no run directory: no best.ckpt to carry, said, and the test is the trained model's" \
  -- train "$T/best/config.ini" --resume "$T/loose.ckpt" --out "$T/less"
check "... and the run finished" test -f "$T/less/checkpoints/last.ckpt"
LK_KILL=test:1 train --resume "$T/best/checkpoints/epoch=3-step=16.ckpt" --out "$T/cut"
check "killed in the test of a run resumed in a new directory: last.ckpt was written first" \
  test -f "$T/cut/checkpoints/last.ckpt"
expect 0 "trained 16 steps" "... so the run resumes" -- train --resume "$T/cut"
check "... and ends as the uninterrupted one" equal "$T/best" "$T/cut"
# A named callback's own kept file belongs to its run too.
train "$T/lin.ini" --out "$T/named" --set plugins.callbacks=keep:checkpoint --set loop.test_ckpt=best
expect 0 "is not the latest checkpoint of a run directory \(that of $T/named\)" \
  "a named callback's kept file (checkpoints/keep/) resumed elsewhere: its run is found" \
  -- train --resume "$T/named/checkpoints/keep/epoch=3-step=16.ckpt" --out "$T/named2"
check "... and the run ends as the uninterrupted one" equal "$T/named" "$T/named2"

# ---- item 6: checkpoint names cannot collide ----

expect 2 "option filename = step-\{step\} \(auto_insert_metric_name = false\) can name a file step-1.ckpt, and the loop \(\[loop\] keep_last; it deletes all but the newest\) names step-N.ckpt in checkpoints/" \
  "filename = step-{step}, the loop's keep_last names: refused, naming both" \
  -- train "$T/lin.ini" --out "$T/clash" --set checkpoint.filename=step-{step} \
  --set checkpoint.auto_insert_metric_name=false --set loop.keep_last=1
check "... before any run directory" test ! -e "$T/clash"
expect 2 "option filename = step-\{step:05d\} .*can name a file step-10000.ckpt" \
  "a zero-padded step: its names reach keep_last's past 9999" \
  -- train "$T/lin.ini" --out "$T/clash" --set checkpoint.filename=step-{step:05d} \
  --set checkpoint.auto_insert_metric_name=false
expect 2 "can name a file 0.tmp-0.ckpt, and every checkpoint writer \(its temporary files" \
  "a pattern that can make a temporary file's name is refused" \
  -- train "$T/lin.ini" --out "$T/clash" --set "checkpoint.filename={epoch}.tmp-{step}" \
  --set checkpoint.auto_insert_metric_name=false
expect 0 "trained" "step-{step} in a directory of its own (a named instance) is no clash" \
  -- train "$T/lin.ini" --out "$T/own" --set plugins.callbacks=keep:checkpoint \
  --set keep.filename=step-{step} --set keep.auto_insert_metric_name=false --set loop.keep_last=1
check "... both keep their files" \
  sh -c "ls '$T/own/checkpoints' | grep -qx step-16.ckpt && ls '$T/own/checkpoints/keep' | grep -qx step-16.ckpt"
expect 2 "callbacks checkpoint \(filename \{epoch\}-\{step\}\) and k \(filename \{epoch\}-\{step\}\) both keep their checkpoints in checkpoints" \
  "two checkpoint callbacks in one directory are refused" \
  -- train "$T/lin.ini" --out "$T/two" --set plugins.callbacks=checkpoint,k:checkpoint \
  --set k.dirpath=checkpoints
# The loop prunes its own names only: a step-099.ckpt put there by hand
# is neither counted (it was, as step 99, the newest) nor deleted.
train "$T/lin.ini" --out "$T/prune" --set loop.max_epochs=2 --set loop.keep_last=1
cp "$T/prune/checkpoints/last.ckpt" "$T/prune/checkpoints/step-099.ckpt"
train --resume "$T/prune" --set loop.max_epochs=3
check "keep_last prunes only its own step-N.ckpt: the newest is kept, step-099.ckpt left alone" \
  sh -c "ls '$T/prune/checkpoints' | grep -c '^step-' | grep -qx 2 &&
    test -f '$T/prune/checkpoints/step-12.ckpt' -a -f '$T/prune/checkpoints/step-099.ckpt'"
finish

#!/bin/sh
# Nothing lost, for real: the holes a hostile test found in resume,
# checkpoints, the run directory and the host's trust in plugins, each
# with the case that showed it. The killer profiler (tests/plugins) stops
# a run at a chosen action, from LK_KILL, so that a killed run and the
# uninterrupted one it is compared with share one config.
. "$LK_SRCDIR/tests/cli/lib.sh"
EDIT="python3 $LK_SRCDIR/tests/cli/ckpt_edit.py"
cd "$T" || exit 1

# same A B: passes when A equals B (printed on failure).
same() {
  [ "$1" = "$2" ] && return 0
  echo "# got [$1], expected [$2]"
  return 1
}
train() { "$LOOPKIT" train "$@" --quiet >"$T/train.out" 2>&1; }
# equal REF DIR: the parameters, metrics.csv and last.ckpt of two runs.
equal() {
  "$LOOPKIT" dump "$1/checkpoints/last.ckpt" >"$T/eq1" 2>&1 &&
    "$LOOPKIT" dump "$2/checkpoints/last.ckpt" >"$T/eq2" 2>&1 &&
    cmp -s "$T/eq1" "$T/eq2" && cmp -s "$1/metrics.csv" "$2/metrics.csv" &&
    cmp -s "$1/checkpoints/last.ckpt" "$2/checkpoints/last.ckpt"
}
rows() { # COLUMN FILE: the cells of COLUMN that are set
  awk -F, -v c="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next }
    k && $k != "" { n++ } END { print n + 0 }' "$2"
}

# ---- 1. the loop's whole state is in every checkpoint ----

# early_stopping on a falling val_loss in mode max: it stops after
# patience + 1 = 3 validations, of 10 epochs.
config es <<INI
[loop]
max_epochs = 10
[plugins]
step = linreg
optimizer = sgd
data = synthetic
callbacks = early_stopping
profiler = killer
[synthetic]
n_train = 16
n_val = 8
n_test = 8
batch_size = 4
[sgd]
lr = 0.05
[early_stopping]
mode = max
patience = 2
INI
train "$T/es.ini" --out "$T/es-ref"
check "early_stopping stops after 3 of 10 epochs" same "$(rows val_loss "$T/es-ref/metrics.csv")" 3

# Killed in the final test, after the stopping epoch's checkpoint: the
# stop is in it, so the resumed run tests and ends; it trains no more.
LK_KILL=test:1 train "$T/es.ini" --out "$T/es-kill"
check "killed during the test" test ! -e "$T/es-kill/checkpoints/last.ckpt.tmp" -a \
  "$(rows test_loss "$T/es-kill/metrics.csv")" -eq 0
train "$T/es.ini" --resume "$T/es-kill/checkpoints/last.ckpt"
check "resumed after the stop: no epoch more, the test once; equal to the uninterrupted run" \
  equal "$T/es-ref" "$T/es-kill"

# The finished run's own last.ckpt: complete, nothing trained, nothing
# appended, the test not run again.
cp "$T/es-ref/metrics.csv" "$T/es.metrics"
cp "$T/es-ref/checkpoints/last.ckpt" "$T/es.last"
: >"$T/es-ref/curves.png.tmp-4242" # a kill while curves.png was drawn
expect 0 'the run was complete already: 12 steps \(3 epochs\)' \
  "resuming a complete run says so" -- train "$T/es.ini" --resume "$T/es-ref/checkpoints/last.ckpt"
check "... and appends no second test row" cmp -s "$T/es.metrics" "$T/es-ref/metrics.csv"
check "... and leaves last.ckpt as it was" cmp -s "$T/es.last" "$T/es-ref/checkpoints/last.ckpt"
check "... and removes the curves.png a killed drawing left" test ! -e "$T/es-ref/curves.png.tmp-4242"
# Raised limits train on from a complete run (its early stop holds, though).
expect 0 'the run was complete already' "an early stop holds when max_epochs is raised" \
  -- train "$T/es.ini" --resume "$T/es-ref/checkpoints/last.ckpt" --set loop.max_epochs=20

# A checkpoint on an epoch's last batch (checkpoint_every_n_steps = the
# epoch's steps), killed right after it: the epoch's end runs in the
# resumed run, where early_stopping needs the latest "loss".
config esl <<INI
[loop]
max_epochs = 6
checkpoint_every_n_steps = 4
[plugins]
step = linreg
optimizer = sgd
data = synthetic
callbacks = early_stopping
profiler = killer
[synthetic]
n_train = 16
n_val = 0
n_test = 0
batch_size = 4
[sgd]
lr = 0.05
[early_stopping]
monitor = loss
patience = 1
min_delta = 0.5
INI
train "$T/esl.ini" --out "$T/esl-ref"
LK_KILL=checkpoint_save/end:2 train "$T/esl.ini" --out "$T/esl-kill"
check "killed after the checkpoint of epoch 1's last batch" same "$(rows loss "$T/esl-kill/metrics.csv")" 8
expect 0 'trained' "resumed there, early_stopping finds the loss it monitors" \
  -- train "$T/esl.ini" --resume "$T/esl-kill/checkpoints/last.ckpt"
check "... and decides as the uninterrupted run did" equal "$T/esl-ref" "$T/esl-kill"

# reduce_on_plateau at epoch intervals, resumed in the middle of an epoch:
# its mean loss counts the batches before the checkpoint too. The loss
# falls by 3% a step (probe: k/2 w^2, sgd lr 0.0151): epoch 1's mean is
# 22% below epoch 0's, not the 24% the threshold asks, so the rate is cut;
# the mean of epoch 1's second half alone would be 26% below.
config rop <<INI
[loop]
max_epochs = 4
checkpoint_every_n_steps = 4
[plugins]
step = probe
optimizer = sgd
data = synthetic
scheduler = reduce_on_plateau
profiler = killer
[synthetic]
n_train = 32
n_val = 0
n_test = 0
batch_size = 4
[probe]
n = 1
[sgd]
lr = 0.0151
[reduce_on_plateau]
monitor = loss
patience = 0
factor = 0.5
threshold = 0.24
INI
train "$T/rop.ini" --out "$T/rop-ref"
check "reduce_on_plateau cut the rate after epoch 1" \
  same "$(awk -F, 'NR > 1 { print $5 }' "$T/rop-ref/metrics.csv" | sort -u | wc -l | tr -d ' ')" 2
LK_KILL=checkpoint_save/end:3 train "$T/rop.ini" --out "$T/rop-kill"
check "killed after step 12, in the middle of epoch 1" same "$(rows loss "$T/rop-kill/metrics.csv")" 12
train "$T/rop.ini" --resume "$T/rop-kill/checkpoints/last.ckpt"
check "reduce_on_plateau resumed mid-epoch: the same rates, the same weights" \
  equal "$T/rop-ref" "$T/rop-kill"

# Every first-order optimizer, killed after its second checkpoint and
# resumed, ends as the uninterrupted run: every state it keeps (buffers,
# counters, ASGD's eta, mu and average, NAdam's mu_product) is in the
# checkpoint. With a momentum that changes every step (momsched, a test
# scheduler that keeps no state of its own), the momentum's too: for sgd
# and nadam here (test_first_order_torch resumes every optimizer that has
# a momentum so, against torch's iterates).
for opt in sgd adam adamw rmsprop adagrad adadelta adamax asgd nadam radam rprop; do
  for sched in none momsched; do
    case $sched:$opt in
    none:* | momsched:sgd | momsched:nadam) ;;
    *) continue ;;
    esac
    {
      printf '[loop]\nmax_epochs = 3\ncheckpoint_every_n_steps = 3\n'
      printf '[plugins]\nstep = linreg\ndata = synthetic\nprofiler = killer\n'
      printf 'optimizer = %s\n' $opt
      [ $sched = none ] || printf 'scheduler = momsched\n[momsched]\nvalues = 0.9,0.5,0,0.7\n'
      printf '[synthetic]\nn_train = 16\nbatch_size = 4\n'
      case $opt in
      sgd) printf '[sgd]\nlr = 0.001\nmomentum = 0.9\n' ;; # lr is required
      rmsprop) printf '[rmsprop]\nmomentum = 0.9\n' ;;
      asgd) printf '[asgd]\nt0 = 2\n' ;; # averaging from step 3 on
      esac
    } >"$T/opt.ini"
    rm -rf "$T/opt-ref" "$T/opt-kill"
    train "$T/opt.ini" --out "$T/opt-ref"
    LK_KILL=checkpoint_save/end:2 train "$T/opt.ini" --out "$T/opt-kill"
    killed=$(rows loss "$T/opt-kill/metrics.csv")
    train "$T/opt.ini" --resume "$T/opt-kill/checkpoints/last.ckpt"
    check "$opt (scheduler: $sched): killed after step $killed of 12, resumed, equal to the uninterrupted run" \
      eval 'same "$killed" 6 && equal "$T/opt-ref" "$T/opt-kill"'
  done
done

# ---- 2. nothing a checkpoint says is trusted ----

# refused CONFIG EDIT PATTERN: the last checkpoint of run CONFIG-ref,
# edited with its CRC made right, is refused with status 2, naming the
# checkpoint and what is wrong, and nothing is written.
refused() {
  $EDIT "$T/$1-ref/checkpoints/last.ckpt" "$T/bad.ckpt" "$2" || {
    not_ok "$1: $2: the edit failed"
    return
  }
  rm -rf "$T/refused"
  expect 2 "$T/bad.ckpt: .*$3" "$1: $2 is refused" -- \
    train "$T/$1.ini" --resume "$T/bad.ckpt" --out "$T/refused"
  check "$1: $2: no run directory written" test ! -e "$T/refused"
}
refused es progress.accum=9223372036854775808 "accum = 9223372036854775808 is not 0"
refused es progress.global_step=18446744073709551615 "global_step = 18446744073709551615 is beyond any run"
refused es progress.epoch=9007199254740993 "epoch = 9007199254740993 is beyond any run"
refused es loop.epoch_losses=5 "epoch_losses = 5 is more than the batches done"
refused es rng=0 "random generator's state is all zero"
refused es "sgd.lr[0]=-0.1" "state of plugin sgd: state sgd.lr\[0\] = -0.10000000000000001: expected a number in \[0,"
refused es "sgd.momentum[0]=-0.5" "state of plugin sgd: state sgd.momentum\[0\] = -0.5: expected a number in \[0,"
# Created with momentum = 0 and no scheduler to drive it, sgd and rmsprop
# keep no momentum buffers: a checkpoint with another momentum cannot
# train (found by fuzz_resume).
refused es "sgd.momentum[0]=3e-316" "state sgd.momentum\[0\] = 3e-316 in the checkpoint, but sgd was created with momentum = 0 and no scheduler drives its momentum, so it keeps no momentum buffers"
refused es "early_stopping.has_best[0]=2" "state of plugin early_stopping: state early_stopping.has_best\[0\] = 2: expected a whole number in \[0, 1\]"
refused es "early_stopping.wait[0]=0.5" "state early_stopping.wait\[0\] = 0.5: expected a whole number"

config ck <<INI
[loop]
max_epochs = 3
[plugins]
step = linreg
optimizer = adam
data = synthetic
callbacks = checkpoint, ema
scheduler = step_lr
[synthetic]
n_train = 16
n_val = 8
batch_size = 4
[adam]
lr = 0.01
amsgrad = true
[checkpoint]
save_top_k = 2
[step_lr]
step_size = 2
INI
train "$T/ck.ini" --out "$T/ck-ref"
refused ck "checkpoint.n_kept[0]=1000" "state checkpoint.n_kept\[0\] = 1000: expected a whole number in \[0, 2\]"
refused ck "checkpoint.kept[1]=-3" "kept entry 0 has epoch -3"
refused ck "adam.step[0]=1.5" "state adam.step\[0\] = 1.5"
refused ck "adam.exp_avg_sq.weight[0]=-1" "state adam.exp_avg_sq.weight\[0\] = -1"
refused ck "adam.beta1[0]=-0.1" "state adam.beta1\[0\] = -0.10000000000000001"
refused ck "ema.flags[0]=0.5" "state ema.flags\[0\] = 0.5"
refused ck "step_lr.last_epoch[0]=-1" "state step_lr.last_epoch\[0\] = -1"
refused ck "step_lr.base_lr[0]=-1" "state step_lr.base_lr\[0\] = -1"

config lb <<INI
[loop]
max_steps = 6
[plugins]
step = rosenbrock
optimizer = lbfgs
[lbfgs]
history_size = 5
max_iter = 3
INI
train "$T/lb.ini" --out "$T/lb-ref"
refused lb "lbfgs.history[0]=6" "state lbfgs.history = \[6, 0\]: expected the pairs held \(0 to history_size = 5\)"
refused lb "lbfgs.history[1]=7" "state lbfgs.history = \[5, 7\]"
refused lb "lbfgs.history[1]=-1" "state lbfgs.history = \[5, -1\]"
refused lb "lbfgs.n_iter[0]=-2" "state lbfgs.n_iter\[0\] = -2"

config rp <<INI
[loop]
max_epochs = 2
[plugins]
step = linreg
optimizer = rmsprop
data = synthetic
scheduler = reduce_on_plateau
[synthetic]
n_train = 16
batch_size = 4
[reduce_on_plateau]
cooldown = 2
INI
train "$T/rp.ini" --out "$T/rp-ref"
refused rp "reduce_on_plateau.best_inf[0]=3" "state reduce_on_plateau.best_inf\[0\] = 3: expected a whole number in \[-1, 1\]"
refused rp "reduce_on_plateau.cooldown_counter[0]=9" "cooldown_counter\[0\] = 9: expected a whole number in \[0, 2\]"
refused rp "rmsprop.square_avg.weight[1]=-0.5" "state rmsprop.square_avg.weight\[1\] = -0.5"
refused rp "rmsprop.momentum[0]=-1" "state rmsprop.momentum\[0\] = -1"
refused rp "rmsprop.momentum[0]=0.5" "state rmsprop.momentum\[0\] = 0.5 in the checkpoint, but rmsprop was created with momentum = 0 and no scheduler drives its momentum"

# The new optimizers' state: counts (torch's float32 ones stop at 2^24),
# averages of squares, ASGD's mu, NAdam's mu_product, Rprop's step sizes.
for opt in adadelta adamax asgd nadam radam rprop; do
  config "o$opt" <<INI
[loop]
max_steps = 4
[plugins]
step = linreg
optimizer = $opt
data = synthetic
[synthetic]
n_train = 16
batch_size = 4
INI
  train "$T/o$opt.ini" --out "$T/o$opt-ref"
done
refused oadadelta "adadelta.acc_delta.weight[0]=-1" "state adadelta.acc_delta.weight\[0\] = -1"
refused oadadelta "adadelta.step[0]=0.5" "state adadelta.step\[0\] = 0.5: expected a whole number"
refused oadamax "adamax.step[0]=16777217" "state adamax.step\[0\] = 16777217: expected a whole number in \[0, 16777216\]"
refused oadamax "adamax.exp_inf.bias[0]=-1" "state adamax.exp_inf.bias\[0\] = -1"
refused oadamax "adamax.beta1[0]=-1" "state adamax.beta1\[0\] = -1"
refused oasgd "asgd.mu[0]=2" "state asgd.mu\[0\] = 2: expected a number in \[0, 1\]"
refused oasgd "asgd.step[0]=1.5" "state asgd.step\[0\] = 1.5"
refused onadam "nadam.mu_product[0]=-0.5" "state nadam.mu_product\[0\] = -0.5"
refused onadam "nadam.exp_avg_sq.weight[1]=-1" "state nadam.exp_avg_sq.weight\[1\] = -1"
refused oradam "radam.exp_avg_sq.bias[0]=-1" "state radam.exp_avg_sq.bias\[0\] = -1"
refused oradam "radam.step[0]=-1" "state radam.step\[0\] = -1"
refused orprop "rprop.step_size.weight[0]=-0.01" "state rprop.step_size.weight\[0\] = -0.01"
refused orprop "rprop.lr[0]=-1" "state rprop.lr\[0\] = -1"

# The metrics row count, resumed in place: more rows than the file has.
cp -r "$T/es-kill" "$T/es-rows"
$EDIT "$T/es-kill/checkpoints/last.ckpt" "$T/es-rows/checkpoints/last.ckpt" loop.metrics_rows=5000
cp "$T/es-rows/metrics.csv" "$T/es-rows.metrics"
expect 2 "metrics.csv has [0-9]+ rows, but the checkpoint being resumed had logged 5000" \
  "a row count beyond metrics.csv is refused" -- train "$T/es.ini" --resume "$T/es-rows/checkpoints/last.ckpt"
check "... and metrics.csv is left as it was" cmp -s "$T/es-rows.metrics" "$T/es-rows/metrics.csv"

# A checkpoint that does not fit this config's data, found at the first
# epoch, before anything is trained: status 2.
LK_KILL=checkpoint_save/end:3 train "$T/rop.ini" --out "$T/rop-mid"
expect 2 'the checkpoint is at batch [0-9]+ of epoch [0-9]+, but the epoch has 1 batches here' \
  "a checkpoint beyond this config's batches is refused, status 2" \
  -- train "$T/rop.ini" --resume "$T/rop-mid/checkpoints/last.ckpt" --set synthetic.batch_size=32

# ---- 3. a resume never writes into another run ----

# A checkpoint outside a run's checkpoints/ (here: a sub-directory of
# another run): a new run directory, the other run untouched.
train "$T/es.ini" --out "$T/other"
mkdir -p "$T/other/sub"
LK_KILL=test:1 train "$T/es.ini" --out "$T/src"
cp "$T/src/checkpoints/last.ckpt" "$T/other/sub/moved.ckpt"
cp "$T/other/metrics.csv" "$T/other.metrics"
cp "$T/other/checkpoints/last.ckpt" "$T/other.last"
rm -rf "$T/runs"
expect 0 "is not the latest checkpoint of a run directory: resuming it at epoch 3, step 12 in a new run directory, runs/es-1" \
  "a checkpoint outside a run's checkpoints/ resumes in a new run directory" \
  -- train "$T/es.ini" --resume "$T/other/sub/moved.ckpt"
check "... which holds the finished run" test -f "$T/runs/es-1/checkpoints/last.ckpt"
check "... and the other run's metrics.csv is untouched" cmp -s "$T/other.metrics" "$T/other/metrics.csv"
check "... and so is its last.ckpt" cmp -s "$T/other.last" "$T/other/checkpoints/last.ckpt"

# An older checkpoint of a run: a new run directory seeded with the run's
# rows; the run itself untouched.
best=$(ls "$T/ck-ref/checkpoints" | grep '^epoch=' | head -1)
cp "$T/ck-ref/metrics.csv" "$T/ck.metrics"
cp "$T/ck-ref/checkpoints/last.ckpt" "$T/ck.last"
expect 0 "is not the latest checkpoint of a run directory \(that of $T/ck-ref\): resuming it at epoch [0-9]+, step [0-9]+ in a new run directory, $T/ck-new" \
  "an older checkpoint of a run resumes in a new run directory, said so" \
  -- train "$T/ck.ini" --resume "$T/ck-ref/checkpoints/$best" --out "$T/ck-new"
check "... the run it came from is untouched" \
  sh -c "cmp -s '$T/ck.metrics' '$T/ck-ref/metrics.csv' && cmp -s '$T/ck.last' '$T/ck-ref/checkpoints/last.ckpt'"
check "... and the new run ends as the uninterrupted one, metrics.csv whole" equal "$T/ck-ref" "$T/ck-new"
expect 2 "--out $T/ck-ref: $T/ck-ref wrote that checkpoint, and it is not its latest" \
  "continuing a run in place from an older checkpoint is refused" \
  -- train "$T/ck.ini" --resume "$T/ck-ref/checkpoints/best.ckpt" --out "$T/ck-ref"
check "... and it is untouched" cmp -s "$T/ck.metrics" "$T/ck-ref/metrics.csv"

# ---- 4. one writer per run directory ----

config slow <<INI
[loop]
max_steps = 60
checkpoint_every_n_steps = 5
[plugins]
step = probe
optimizer = sgd
[probe]
n = 1000
delay_us = 20000
[sgd]
lr = 0.001
INI
"$LOOPKIT" train "$T/slow.ini" --out "$T/busy" --quiet >"$T/busy.out" 2>&1 &
pid=$!
i=0
# until its first checkpoint (step 5), which the resume below names
while [ $i -lt 1200 ] && [ ! -e "$T/busy/checkpoints/last.ckpt" ]; do
  sleep 0.05
  i=$((i + 1))
done
# Stopped, it still holds the lock, and cannot end before the two
# refusals below are checked (under valgrind they take seconds).
kill -STOP $pid
expect 2 "run directory $T/busy is in use by another loopkit \(pid $pid holds $T/busy/.lock\)" \
  "a second run into the same --out is refused, naming the holder's pid" \
  -- train "$T/slow.ini" --out "$T/busy"
expect 2 "run directory $T/busy is in use by another loopkit \(pid $pid" \
  "so is a resume while the run still writes" \
  -- train "$T/slow.ini" --resume "$T/busy/checkpoints/last.ckpt"
kill -CONT $pid
wait $pid
check "the first run was not disturbed" test $? -eq 0
train "$T/slow.ini" --out "$T/busy-ref"
check "... its metrics.csv is one run's, not two interleaved" cmp -s "$T/busy-ref/metrics.csv" "$T/busy/metrics.csv"
expect 0 'trained 80 steps' "once it ended, the run resumes" \
  -- train "$T/slow.ini" --resume "$T/busy/checkpoints/last.ckpt" --set loop.max_steps=80

# ---- 6. the host does not trust what plugins return ----

config bad <<INI
[loop]
max_steps = 3
[plugins]
step = probe
optimizer = sgd
[sgd]
lr = 0.001
INI
for what in "count:returned 21 metrics, at most 16" \
  "comma:metric 1 \"a,b\" is not a metrics.csv column name" \
  "newline:metric 1 \"a" \
  "null:metric 1 \"\(null\)\" has no name" \
  "reserved:metric 1 \"epoch\" is a column the host writes itself" \
  "twice:metric 1 \"w0\" appears twice in one result"; do
  expect 1 "training_step of plugin probe.*${what#*:}" "a result with bad metrics (${what%%:*}) is refused, naming plugin and entry" \
    -- train "$T/bad.ini" --out "$T/bad-${what%%:*}" --set probe.bad_result="${what%%:*}"
  check "... and metrics.csv keeps its header" sh -c "head -1 '$T/bad-${what%%:*}/metrics.csv' | grep -qx 'step,epoch,loss'"
done
expect 1 'training_step of plugin probe: failed with -8 \(plugin failed\) without saying why \(it did not call lk_fail\)' \
  "an entry failing without lk_fail is named" -- train "$T/bad.ini" --out "$T/silent" --set probe.silent_fail_at=1

# ---- 7. smaller ones ----

# The out-of-memory message names the tensor (it used to read it after
# freeing it).
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1 \
  expect 2 'plugin mlp: out of memory for parameter layer0.weight \(13153337344 elements of f32\)' \
  "a tensor too big for memory is refused by name" \
  -- train "$LK_SRCDIR/examples/fashion-mnist.ini" --out "$T/oom" --set mlp.layers=784,16777216,10 \
  --set idx.limit=64

# SIGINT during the final test stops it at once (status 130); the
# checkpoint before it holds the trained run, and a resume tests.
LK_KILL=test:1:0:INT "$LOOPKIT" train "$T/es.ini" --out "$T/int-test" >"$T/int.out" 2>&1
check "SIGINT during the test: status 130" test $? -eq 130
check "... saying it stopped the test" grep -q "interrupted during the test" "$T/int.out"
train "$T/es.ini" --resume "$T/int-test/checkpoints/last.ckpt"
check "... and the resumed run ends as the uninterrupted one" equal "$T/es-ref" "$T/int-test"
# During the last checkpoint: it is written whole, the run is complete,
# and the status says it was interrupted.
LK_KILL=checkpoint_save:4:0:TERM "$LOOPKIT" train "$T/es.ini" --out "$T/int-save" >"$T/int.out" 2>&1
check "SIGTERM during the final save: status 143" test $? -eq 143
check "... the run is complete" grep -q "SIGTERM came as the run ended: it is complete" "$T/int.out"
check "... and equal to the uninterrupted one" equal "$T/es-ref" "$T/int-save"

# Only regular files are read: a FIFO would block forever, /dev/zero
# would never end.
# (A timeout: without the check, these never return.)
mkfifo "$T/fifo.ini"
timeout 20 "$LOOPKIT" train "$T/fifo.ini" >"$T/out" 2>&1
check "a FIFO as the config is refused, status 2" test $? -eq 2
check "... saying what it is" grep -q "config $T/fifo.ini is not a regular file (a FIFO)" "$T/out"
timeout 20 "$LOOPKIT" train /dev/zero >"$T/out" 2>&1
check "/dev/zero as the config is refused, status 2" test $? -eq 2
check "... saying what it is" grep -q "config /dev/zero is not a regular file (a character device)" "$T/out"
config csvfifo <<INI
[loop]
max_epochs = 1
[plugins]
step = linear
optimizer = sgd
data = csv
[csv]
path = $T/fifo.ini
[linear]
inputs = 2
[sgd]
lr = 0.001
INI
timeout 20 "$LOOPKIT" train "$T/csvfifo.ini" --out "$T/csvfifo" >"$T/out" 2>&1
check "a FIFO as a data file is refused, status 2" test $? -eq 2
check "... saying what it is" grep -q "data file $T/fifo.ini is not a regular file (a FIFO)" "$T/out"
dd if=/dev/zero bs=1024 count=17000 of="$T/huge.ini" 2>/dev/null
expect 2 "config $T/huge.ini is 17408000 bytes, more than the 16777216 a config may have" \
  "a config of 17 MB is refused before it is read" -- train "$T/huge.ini"

# What would fail only at the end fails before training, status 2.
mkdir -p "$T/ckfile" && ln -s "$T/nowhere" "$T/ckfile/checkpoints"
expect 2 "$T/ckfile/checkpoints is not a directory: checkpoints cannot be written" \
  "a checkpoints path that is not a directory (a dangling link): refused before training" \
  -- train "$T/es.ini" --out "$T/ckfile"
check "... nothing was trained" test ! -e "$T/ckfile/metrics.csv"
mkdir -p "$T/ckfile2" && : >"$T/ckfile2/checkpoints"
expect 2 "--out $T/ckfile2 already holds a run" "a checkpoints path that is a file: refused before training" \
  -- train "$T/es.ini" --out "$T/ckfile2"
cp -r "$T/es-kill" "$T/ro"
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null 2>&1; then
  # root writes anywhere: the run is resumed by nobody, who cannot write it.
  chmod 755 "$T"
  as_nobody="setpriv --reuid=65534 --regid=65534 --clear-groups"
else
  chmod -R a-w "$T/ro"
  as_nobody=
fi
$as_nobody "$LOOPKIT" train "$T/es.ini" --resume "$T/ro/checkpoints/last.ckpt" >"$T/ro.out" 2>&1
check "a run directory that cannot be written: status 2 before training" test $? -eq 2
check "... naming what cannot be written" grep -q "cannot .*$T/ro" "$T/ro.out"
chmod -R u+w "$T/ro"
chmod 700 "$T"

expect 2 "name ema is used twice in \[plugins\] callbacks" "callbacks = ema,ema is refused" \
  -- train "$T/ck.ini" --out "$T/ema2" --set plugins.callbacks=ema,ema
finish

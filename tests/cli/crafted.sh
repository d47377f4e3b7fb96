#!/bin/sh
# Checkpoints whose CRC is right but whose values no uninterrupted run can
# write (issue 23, item 7): each plugin's check_state refuses them, naming
# the state and the value, with status 2 and before anything is written;
# the run's own checkpoint resumes. And a scheduler cannot set a momentum
# the optimizer's create would refuse (beta1 = 1): what set_momentum
# takes and what check_state takes are the same.
. "$LK_SRCDIR/tests/cli/lib.sh"
EDIT="python3 $LK_SRCDIR/tests/cli/ckpt_edit.py"
cd "$T" || exit 1

train() { "$LOOPKIT" train "$@" --quiet >"$T/train.out" 2>&1; }

# refused CONFIG EDIT PATTERN: run CONFIG-ref's last checkpoint, edited
# with its CRC made right, is refused with status 2 naming the checkpoint
# and PATTERN, and no run directory is written.
refused() {
  $EDIT "$T/$1-ref/checkpoints/last.ckpt" "$T/bad.ckpt" $2 || {
    not_ok "$1: $2: the edit failed"
    return
  }
  rm -rf "$T/refused"
  expect 2 "$T/bad.ckpt: .*$3" "$1: $2 is refused" -- \
    train "$T/$1.ini" --resume "$T/bad.ckpt" --out "$T/refused"
  check "$1: $2: no run directory written" test ! -e "$T/refused"
}
# accepted CONFIG EDIT: the same edit gives a checkpoint a run can write,
# which resumes (into a new run directory).
accepted() {
  $EDIT "$T/$1-ref/checkpoints/last.ckpt" "$T/good.ckpt" $2 &&
    rm -rf "$T/accepted" &&
    train "$T/$1.ini" --resume "$T/good.ckpt" --out "$T/accepted"
}

# ---- composite schedulers: the children in step with the parent ----

# chained steps every child at every step: their last_epoch are equal.
config ch <<INI
[loop]
max_steps = 5
[plugins]
step = rosenbrock
optimizer = sgd
scheduler = chained
[sgd]
lr = 0.001
momentum = 0.9
[chained]
schedulers = oc:onecycle, d:exponential, r:cyclic
interval = step
[oc]
max_lr = 0.001
total_steps = 10
cycle_momentum = false
[d]
gamma = 0.9
[r]
base_lr = 0.0001
max_lr = 0.001
INI
train "$T/ch.ini" --out "$T/ch-ref"
refused ch "d.last_epoch[0]=3" "state d.last_epoch\[0\] = 3 is out of step with oc.last_epoch\[0\] = 5: chained steps all its schedulers at every step"
refused ch "r.last_epoch[0]=6" "state r.last_epoch\[0\] = 6 is out of step with oc.last_epoch\[0\] = 5"
refused ch "oc.last_epoch[0]=4 d.last_epoch[0]=4" "state r.last_epoch\[0\] = 5 is out of step with oc.last_epoch\[0\] = 4"
# All three at another step is a state a run writes (after 4 steps).
check "chained: all children at step 4 resumes" \
  accepted ch "oc.last_epoch[0]=4 d.last_epoch[0]=4 r.last_epoch[0]=4"

# sequential: at last_epoch e, the scheduler of each milestone interval
# counts its steps since its milestone (the first from 0), the earlier
# ones stopped at their interval's end, the later ones at 0.
config sq <<INI
[loop]
max_steps = 9
[plugins]
step = rosenbrock
optimizer = sgd
scheduler = lrs:sequential
[lrs]
schedulers = w:linear_warmup, c:constant, e:exponential
milestones = 2, 5
interval = step
[w]
total_iters = 2
[c]
factor = 0.5
[e]
gamma = 0.9
[sgd]
lr = 0.001
INI
train "$T/sq.ini" --out "$T/sq-ref"
check "sequential after 9 steps: w at 1, c at 2, e at 4" sh -c \
  "$EDIT '$T/sq-ref/checkpoints/last.ckpt' --dump | grep -c -x -e 'w.last_epoch\[0\] 1' -e 'c.last_epoch\[0\] 2' -e 'e.last_epoch\[0\] 4' -e 'lrs.last_epoch\[0\] 9' | grep -qx 4"
refused sq "lrs.last_epoch[0]=8" "state e.last_epoch\[0\] = 4 is out of step with lrs.last_epoch\[0\] = 8: expected 3 \(sequential's scheduler 3 of 3 counts its steps from step 5 on\)"
refused sq "w.last_epoch[0]=0" "state w.last_epoch\[0\] = 0 is out of step with lrs.last_epoch\[0\] = 9: expected 1 \(sequential's scheduler 1 of 3 counts its steps from step 0 until the next milestone\)"
refused sq "c.last_epoch[0]=3" "state c.last_epoch\[0\] = 3 is out of step with lrs.last_epoch\[0\] = 9: expected 2"
refused sq "lrs.last_epoch[0]=3 e.last_epoch[0]=0" "state c.last_epoch\[0\] = 2 is out of step with lrs.last_epoch\[0\] = 3: expected 1"
check "sequential: every count as at step 3 resumes" \
  accepted sq "lrs.last_epoch[0]=3 c.last_epoch[0]=1 e.last_epoch[0]=0"

# ---- a scheduler's own count ----

# onecycle is stepped at most total_steps times after its constructor's
# step (torch's ValueError past that); a run of total_steps steps writes
# last_epoch = total_steps.
config oc <<INI
[loop]
max_steps = 10
[plugins]
step = rosenbrock
optimizer = sgd
scheduler = onecycle
[onecycle]
max_lr = 0.001
total_steps = 10
[sgd]
lr = 0.001
INI
train "$T/oc.ini" --out "$T/oc-ref"
refused oc "onecycle.last_epoch[0]=11" "state onecycle.last_epoch\[0\] = 11: expected a whole number in \[0, 10\]"
check "onecycle: last_epoch = total_steps is what the run wrote" sh -c \
  "$EDIT '$T/oc-ref/checkpoints/last.ckpt' --dump | grep -qx 'onecycle.last_epoch\[0\] 10'"

# ---- optimizers: a momentum in its option's range ----

# beta1, which onecycle and cyclic cycle in the adam family, is < 1 as
# option betas requires (create refuses betas = 1,0.999): one check in
# optim_common.h for adam, adamw, adamax, nadam and radam; two of them
# here (under valgrind every run counts).
for opt in adam nadam; do
  config "b$opt" <<INI
[loop]
max_steps = 3
[plugins]
step = rosenbrock
optimizer = $opt
INI
  train "$T/b$opt.ini" --out "$T/b$opt-ref"
  refused "b$opt" "$opt.beta1[0]=1" "state $opt.beta1\[0\] = 1: expected a number in \[0, 1\) \(the range of option $opt.betas\)"
done
refused bnadam "nadam.mu_product[0]=1.5" "state nadam.mu_product\[0\] = 1.5: expected a number in \[0, 1\]"
refused badam "adam.beta1[0]=1.5" "state adam.beta1\[0\] = 1.5: expected a number in \[0, 1\)"
check "adam: beta1 = 0.99 resumes" accepted badam "adam.beta1[0]=0.99"
expect 2 "option adam.betas = 1,0.999: value 1 must be >= 0 and < 1" \
  "create refuses betas = 1,0.999" -- train "$T/badam.ini" --set adam.betas=1,0.999
# A scheduler that would set beta1 = 1 is refused before anything is
# trained, as the option is (torch would divide by zero at the first step).
rm -rf "$T/nowhere"
expect 2 "plugin onecycle .* failed to start: set_momentum of optimizer adam: adam.beta1 = 1: adam takes a beta1 in \[0, 1\) only \(the range of its option betas\)" \
  "onecycle with max_momentum = 1 over adam is refused" -- \
  train "$T/badam.ini" --set plugins.scheduler=onecycle --set onecycle.max_lr=0.01 \
  --set onecycle.total_steps=3 --set onecycle.max_momentum=1 --out "$T/nowhere"
check "... and writes no run directory" test ! -e "$T/nowhere"
# sgd's momentum has no upper bound, as its option's.
config sg <<INI
[loop]
max_steps = 3
[plugins]
step = rosenbrock
optimizer = sgd
[sgd]
lr = 0.001
momentum = 0.9
INI
train "$T/sg.ini" --out "$T/sg-ref"
check "sgd: momentum = 1.5 resumes" accepted sg "sgd.momentum[0]=1.5"
refused sg "sgd.momentum[0]=-0.5" "state sgd.momentum\[0\] = -0.5: expected a number in \[0, inf\) \(the range of option sgd.momentum\)"

# ---- momentum buffers a scheduler started ----

# sgd created with momentum = 0 under cyclic from momentum 0: its buffers
# exist from setup, and initialized = 0 until the first step whose
# momentum is not 0 fills them, so a buffer is 0 while it is.
config late <<INI
[loop]
max_steps = 1
[plugins]
step = rosenbrock
optimizer = sgd
scheduler = cyclic
[cyclic]
base_lr = 0.0001
max_lr = 0.001
step_size_up = 3
base_momentum = 0.9
max_momentum = 0
[sgd]
lr = 0.001
INI
train "$T/late.ini" --out "$T/late-ref"
check "sgd under cyclic from momentum 0: after step 1, no buffer filled yet" sh -c \
  "$EDIT '$T/late-ref/checkpoints/last.ckpt' --dump | grep -c -x -e 'sgd.initialized\[0\] 0' -e 'sgd.momentum_buffer.x\[0\] 0' | grep -qx 2"
refused late "sgd.momentum_buffer.x[1]=0.5" "state sgd.momentum_buffer.x\[1\] = 0.5, but sgd.initialized\[0\] = 0 says no step has made the momentum buffers yet"
refused late "sgd.initialized[0]=2" "state sgd.initialized\[0\] = 2: expected a whole number in \[0, 1\]"
check "sgd: the buffers filled (initialized = 1) resume" \
  accepted late "sgd.initialized[0]=1 sgd.momentum_buffer.x[1]=0.5"

# rmsprop's first step decides whether it has buffers: before it (step 0)
# has_momentum_buffer is 0, and while it is 0 the buffers are.
sed -e 's/optimizer = sgd/optimizer = rmsprop/' -e '/^\[sgd\]$/d' -e '/^lr = 0.001$/d' "$T/late.ini" >"$T/rlate.ini"
train "$T/rlate.ini" --out "$T/rlate-ref"
check "rmsprop under cyclic from momentum 0: its first step made no buffer" sh -c \
  "$EDIT '$T/rlate-ref/checkpoints/last.ckpt' --dump | grep -qx 'rmsprop.has_momentum_buffer\[0\] 0'"
refused rlate "rmsprop.momentum_buffer.x[0]=-2" "state rmsprop.momentum_buffer.x\[0\] = -2, but rmsprop.has_momentum_buffer\[0\] = 0 says no step has made"
refused rlate "rmsprop.step[0]=0 rmsprop.has_momentum_buffer[0]=1" "state rmsprop.has_momentum_buffer\[0\] = 1: expected a whole number in \[0, 0\]"
# That run fails at its second step, as torch's KeyError; its step-1
# checkpoint, which cannot step either, is refused.
expect 1 "momentum 0.3 at step 2, but the first step had momentum 0 .*KeyError" \
  "rmsprop whose momentum starts at step 2 fails there" -- \
  train "$T/rlate.ini" --set loop.max_steps=3 --out "$T/rlate-run"
expect 2 "state rmsprop.momentum\[0\] = 0.3, but rmsprop.has_momentum_buffer\[0\] = 0 says the first step had momentum 0 .*KeyError" \
  "... and its step-1 checkpoint is refused" -- \
  train "$T/rlate.ini" --set loop.max_steps=3 --resume "$T/rlate-ref/checkpoints/last.ckpt"
# onecycle sets base_momentum at create too: beta1 = 1 at the cycle's peak
# is refused before anything is trained.
expect 2 "set_momentum of optimizer adam: adam.beta1 = 1: adam takes a beta1 in \[0, 1\) only" \
  "onecycle with base_momentum = 1 over adam is refused at create" -- \
  train "$T/badam.ini" --set plugins.scheduler=onecycle --set onecycle.max_lr=0.01 \
  --set onecycle.total_steps=3 --set onecycle.base_momentum=1 --out "$T/nowhere"

finish

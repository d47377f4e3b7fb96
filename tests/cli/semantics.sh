#!/bin/sh
# The loop's semantics, seen through the probe plugin's trace: hook and
# closure order, accumulation, multiple evaluations, manual optimization,
# clipping by norm and by value.
. "$LK_SRCDIR/tests/cli/lib.sh"

config auto <<INI
[loop]
max_steps = 1
[plugins]
step = probe
zero_grad = probe
optimizer = probe
callbacks = tracecb
[probe]
trace = $T/auto.trace
[tracecb]
trace = $T/auto.trace
INI
"$LOOPKIT" train "$T/auto.ini" --out "$T/auto" --quiet >/dev/null 2>&1
cat >"$T/auto.want" <<'EOF2'
cb:on_train_start
cb:on_train_batch_start
model:on_train_batch_start
training_step batch=0
cb:on_before_zero_grad
model:on_before_zero_grad
zero_grad
cb:on_before_backward
model:on_before_backward
backward scale=1
cb:on_after_backward
model:on_after_backward
cb:on_before_optimizer_step
model:on_before_optimizer_step
closure -> 1
optimizer_step
cb:on_after_optimizer_step
model:on_after_optimizer_step
cb:on_train_batch_end
model:on_train_batch_end
cb:on_train_end
EOF2
check "hook and closure order of one batch (callbacks before the model)" \
  diff "$T/auto.want" "$T/auto.trace"

# Accumulation over 3 batches; an epoch of 10 batches ends with a short window.
config accum <<INI
[loop]
max_epochs = 1
accumulate_grad_batches = 3
[plugins]
step = probe
zero_grad = probe
optimizer = probe
data = synthetic
[synthetic]
n_train = 10
n_val = 0
n_test = 0
batch_size = 1
[probe]
trace = $T/accum.trace
INI
expect 0 'trained 4 steps' "accumulation: 10 batches in windows of 3 make 4 steps" \
  -- train "$T/accum.ini" --out "$T/accum"
check "accumulation: zero_grad once per window" test "$(count zero_grad "$T/accum.trace")" -eq 4
check "accumulation: backward on every batch" test "$(grep -c '^backward' "$T/accum.trace")" -eq 10
check "accumulation: loss divided by the window size" \
  test "$(grep -c '^backward scale=0.333333' "$T/accum.trace")" -eq 10
check "accumulation: optimizer steps at window ends and epoch end" \
  test "$(count optimizer_step "$T/accum.trace")" -eq 4
# the first zero_grad comes right after the first training_step; none between
grep -v '^model:' "$T/accum.trace" | awk 'NR<=12' | tr '\n' '|' >"$T/accum.head"
check "accumulation: window order (step, zero_grad, backward; step, backward; ...)" \
  grep -q '^training_step batch=0|zero_grad|backward scale=0.333333|training_step batch=1|backward scale=0.333333|training_step batch=2|backward scale=0.333333|closure' "$T/accum.head"
# metrics: one row per optimizer step, loss = sum of the window's divided losses
check "accumulation: metrics.csv has a row per optimizer step" \
  test "$(($(wc -l <"$T/accum/metrics.csv") - 1))" -eq 4

# An optimizer that evaluates three times: each evaluation runs every part.
config evals <<INI
[loop]
max_steps = 2
gradient_clip_val = 100
[plugins]
step = probe
zero_grad = probe
optimizer = probe
callbacks = tracecb
[probe]
evals = 3
trace = $T/evals.trace
[tracecb]
trace = $T/evals.trace
INI
"$LOOPKIT" train "$T/evals.ini" --out "$T/evals" --quiet >/dev/null 2>&1
check "three evaluations per step: training_step 6 times" test "$(grep -c '^training_step' "$T/evals.trace")" -eq 6
check "three evaluations per step: zero_grad 6 times" test "$(count zero_grad "$T/evals.trace")" -eq 6
check "three evaluations per step: backward 6 times" test "$(grep -c '^backward' "$T/evals.trace")" -eq 6
check "hooks and clipping run after every evaluation" \
  test "$(count cb:on_before_optimizer_step "$T/evals.trace")" -eq 6

# Manual optimization: no zero_grad/backward in the closure; the step drives.
config manual <<INI
[loop]
max_steps = 2
manual_optimization = true
[plugins]
step = probe
zero_grad = probe
optimizer = probe
[probe]
manual = true
trace = $T/manual.trace
INI
expect 0 'trained 2 steps' "manual optimization trains" -- train "$T/manual.ini" --out "$T/manual"
cat >"$T/manual.want" <<'EOF2'
model:on_train_batch_start
training_step batch=0
model:on_before_zero_grad
zero_grad
model:on_before_backward
backward scale=1
model:on_after_backward
model:on_before_optimizer_step
optimizer_step
model:on_after_optimizer_step
model:on_train_batch_end
EOF2
head -11 "$T/manual.trace" >"$T/manual.first"
check "manual optimization: the step drives zero_grad, backward, step, with hooks" \
  diff "$T/manual.want" "$T/manual.first"
check "manual optimization: one training_step per batch" test "$(grep -c '^training_step' "$T/manual.trace")" -eq 2
check "manual optimization: the optimizer got no closure" sh -c "! grep -q closure '$T/manual.trace'"
# w = 1 - 0.1 * 1 = 0.9, then 0.81
check "manual optimization: updates applied" test "$(value 'w[0]' "$T/manual/checkpoints/last.ckpt")" = 0.81000000000000005

# Clipping: constant gradient 3 on 2 weights (norm 4.2426...), lr 1, one step.
config clip <<INI
[loop]
max_steps = 1
gradient_clip_val = 1
[plugins]
step = probe
optimizer = probe
[probe]
grad = 3
lr = 1
INI
"$LOOPKIT" train "$T/clip.ini" --out "$T/clipn" --quiet >/dev/null 2>&1
check "clipping by norm: w = 1 - 3/(3*sqrt(2) + 1e-6)" \
  awk -v v="$(value 'w[0]' "$T/clipn/checkpoints/last.ckpt")" \
  'BEGIN { want = 1 - 3 / (3 * sqrt(2) + 1e-6); d = v - want; exit !(d < 1e-15 && d > -1e-15) }'
"$LOOPKIT" train "$T/clip.ini" --out "$T/clipv" --quiet --set loop.gradient_clip_algorithm=value \
  --set loop.gradient_clip_val=0.25 >/dev/null 2>&1
check "clipping by value: w = 1 - 0.25" test "$(value 'w[1]' "$T/clipv/checkpoints/last.ckpt")" = 0.75
"$LOOPKIT" train "$T/clip.ini" --out "$T/clip0" --quiet --set loop.gradient_clip_val=0 >/dev/null 2>&1
check "no clipping when gradient_clip_val = 0" test "$(value 'w[0]' "$T/clip0/checkpoints/last.ckpt")" = -2

# Manual optimization clipping through the host.
"$LOOPKIT" train "$T/clip.ini" --out "$T/clipm" --quiet --set loop.gradient_clip_val=0 \
  --set loop.manual_optimization=true --set probe.manual=true --set probe.manual_clip=1 >/dev/null 2>&1
check "manual optimization: lk_host_clip_gradients clips by norm" \
  awk -v v="$(value 'w[0]' "$T/clipm/checkpoints/last.ckpt")" \
  'BEGIN { want = 1 - 3 / (3 * sqrt(2) + 1e-6); d = v - want; exit !(d < 1e-15 && d > -1e-15) }'

# A step that gives no loss: warned once, no backward, no update.
expect 0 'warning: training_step returned no loss' "no loss: a warning" \
  -- train "$T/clip.ini" --out "$T/noloss" --set probe.no_loss=true
check "no loss: parameters untouched" test "$(value 'w[0]' "$T/noloss/checkpoints/last.ckpt")" = 1
# Every optimizer that gets NaN from the closure leaves the parameters alone.
config nanopt <<INI
[loop]
max_steps = 1
[plugins]
step = probe
optimizer = sgd
[probe]
nan_loss_at = 0
[sgd]
lr = 0.001
INI
for opt in sgd adam adamw rmsprop adagrad adadelta adamax asgd nadam radam rprop lbfgs sam; do
  "$LOOPKIT" train "$T/nanopt.ini" --out "$T/nan-$opt" --quiet --set plugins.optimizer=$opt >/dev/null 2>&1
  check "$opt: a NaN from the closure leaves the parameters untouched" \
    test "$(value 'w[0]' "$T/nan-$opt/checkpoints/last.ckpt"):$(value 'w[1]' "$T/nan-$opt/checkpoints/last.ckpt")" = 1:1
done

# sam: two evaluations per step, each with zero_grad and backward, then the
# base optimizer's step from the original point with the perturbed gradient.
config sam <<INI
[loop]
max_steps = 1
[plugins]
step = probe
zero_grad = probe
optimizer = sam
[sam]
rho = 0.05
[sgd]
lr = 0.1
[probe]
trace = $T/sam.trace
INI
expect 0 'trained 1 steps' "sam trains with sgd as its base" -- train "$T/sam.ini" --out "$T/sam"
check "sam: two evaluations, each running zero_grad and backward" \
  test "$(grep -c '^training_step' "$T/sam.trace"):$(count zero_grad "$T/sam.trace"):$(grep -c '^backward' "$T/sam.trace")" = 2:2:2
# w = 1 - lr * (1 + rho / sqrt(2)): the gradient k*w at w + rho * g/|g|
check "sam: the base step uses the perturbed point's gradient" \
  awk -v v="$(value 'w[0]' "$T/sam/checkpoints/last.ckpt")" \
  'BEGIN { want = 1 - 0.1 * (1 + 0.05 / sqrt(2)); d = v - want; exit !(d < 1e-12 && d > -1e-12) }'
check "sam: the base's options come from its own section" grep -q '^lr = 0.1$' "$T/sam/config.ini"
expect 2 'plugin sam: rosenbrock \(.*\) cannot be its optimizer' "sam refuses a base that is no optimizer" \
  -- train "$T/sam.ini" --out "$T/sam2" --set sam.base=rosenbrock
expect 2 'plugin sam: sam \(.*\) cannot be its optimizer' "sam refuses itself as its base" \
  -- train "$T/sam.ini" --out "$T/sam3" --set sam.base=sam
# [loop] threads reaches plugins as lk_host_threads: N as given, 0 as the
# CPUs this process may run on (taskset narrows them).
config threads <<INI
[loop]
max_steps = 1
[plugins]
step = probe
zero_grad = probe
optimizer = probe
[probe]
say_threads = true
trace = $T/threads.trace
INI
"$LOOPKIT" train "$T/threads.ini" --out "$T/threads3" --set loop.threads=3 --quiet >/dev/null 2>&1
check "threads = 3: lk_host_threads gives 3" grep -qx 'threads=3' "$T/threads.trace"
: >"$T/threads.trace"
"$LOOPKIT" train "$T/threads.ini" --out "$T/threads0" --quiet >/dev/null 2>&1
check "threads = 0 (the default): one per CPU, $(nproc)" grep -qx "threads=$(nproc)" "$T/threads.trace"
check "config.ini records threads = 0" grep -qx 'threads = 0' "$T/threads0/config.ini"
if command -v taskset >/dev/null 2>&1; then
  : >"$T/threads.trace"
  taskset -c 0 "$LOOPKIT" train "$T/threads.ini" --out "$T/threads1" --quiet >/dev/null 2>&1
  check "threads = 0 under taskset -c 0: 1" grep -qx 'threads=1' "$T/threads.trace"
fi
# Under a launcher, threads = 0 is the CPUs divided among the processes on
# this node (its local-rank variables), at least 1, and said at the start;
# a count that is given is taken as it is.
cpus=$(nproc)
half=$((cpus / 2 > 1 ? cpus / 2 : 1))
ompi() { env OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_RANK=0 "$@"; }
: >"$T/threads.trace"
ompi OMPI_COMM_WORLD_LOCAL_SIZE=2 "$LOOPKIT" train "$T/threads.ini" --out "$T/thr-l2" \
  --set plugins.strategy=single >"$T/thr.out" 2>&1
check "threads = 0, 2 ranks of mpirun on this node: $cpus CPUs / 2 = $half" grep -qx "threads=$half" "$T/threads.trace"
check "... said at the start, with the variable that told" \
  grep -q "^threads: $half, the $cpus CPUs\{0,1\} this process may use shared by the 2 processes on this node (OMPI_COMM_WORLD_LOCAL_SIZE=2)" "$T/thr.out"
: >"$T/threads.trace"
ompi OMPI_COMM_WORLD_LOCAL_SIZE=$((cpus * 3)) "$LOOPKIT" train "$T/threads.ini" --out "$T/thr-lm" \
  --set plugins.strategy=single --quiet >/dev/null 2>&1
check "more ranks than CPUs: 1 thread each" grep -qx "threads=1" "$T/threads.trace"
: >"$T/threads.trace"
ompi OMPI_COMM_WORLD_LOCAL_SIZE=2 "$LOOPKIT" train "$T/threads.ini" --out "$T/thr-l3" \
  --set plugins.strategy=single --set loop.threads=3 --quiet >/dev/null 2>&1
check "threads = 3 under a launcher: 3, as given" grep -qx "threads=3" "$T/threads.trace"
: >"$T/threads.trace"
env PMI_SIZE=2 PMI_RANK=0 MPI_LOCALNRANKS=2 "$LOOPKIT" train "$T/threads.ini" --out "$T/thr-mpich" \
  --set plugins.strategy=single --quiet >/dev/null 2>&1
check "MPICH's and Intel MPI's MPI_LOCALNRANKS: the same division" grep -qx "threads=$half" "$T/threads.trace"
: >"$T/threads.trace"
env SLURM_PROCID=0 SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=4 SLURM_NODEID=1 \
  SLURM_STEP_TASKS_PER_NODE='1,2(x2),1' "$LOOPKIT" train "$T/threads.ini" --out "$T/thr-srun" \
  --set plugins.strategy=single --quiet >/dev/null 2>&1
check "srun: SLURM_STEP_TASKS_PER_NODE at SLURM_NODEID (1,2(x2),1 on node 1: 2)" grep -qx "threads=$half" "$T/threads.trace"
: >"$T/threads.trace"
OMPI_COMM_WORLD_LOCAL_SIZE=2 "$LOOPKIT" train "$T/threads.ini" --out "$T/thr-nolaunch" --quiet >/dev/null 2>&1
check "a local-rank variable without a launcher divides nothing" grep -qx "threads=$cpus" "$T/threads.trace"
expect 2 'loop.threads = "-1": expected an integer >= 0' "threads = -1 is refused, naming the key" -- train "$T/threads.ini" --out "$T/threadsm" --set loop.threads=-1
finish

#!/bin/sh
# The composite schedulers from the command line (issue 16, item 4):
# sequential (torch's SequentialLR, the scheduler kind of the plugin that
# is also the sequential model) and chained (ChainedScheduler), their
# children named instances with options in their own sections. A run
# killed mid-schedule and resumed equals the uninterrupted one (dump,
# metrics.csv's lr and momentum columns); config errors exit 2 naming
# file:line; the model and the scheduler of sequential.so live side by
# side as two named instances. Rates against torch: test_scheduler_sequences.
. "$LK_SRCDIR/tests/cli/lib.sh"
IRIS=$LK_TEST_DATA/sklearn-iris.csv
cd "$T" || exit 1

train() { "$LOOPKIT" train "$@" --quiet >"$T/train.out" 2>&1; }
# column NAME FILE: the cells of metrics.csv column NAME, one a line.
column() {
  awk -F, -v c="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next }
    k { print $k }' "$2"
}
# same_run REF DIR: the same checkpoint (loopkit dump), and the same lr and
# momentum columns and the whole metrics.csv.
same_run() {
  "$LOOPKIT" dump "$1/checkpoints/last.ckpt" >"$T/d1" 2>&1 &&
    "$LOOPKIT" dump "$2/checkpoints/last.ckpt" >"$T/d2" 2>&1 &&
    cmp -s "$T/d1" "$T/d2" &&
    column lr "$1/metrics.csv" >"$T/c1" && column lr "$2/metrics.csv" >"$T/c2" &&
    cmp -s "$T/c1" "$T/c2" && test "$(wc -l <"$T/c1")" -gt 1 &&
    column momentum "$1/metrics.csv" >"$T/c1" &&
    column momentum "$2/metrics.csv" >"$T/c2" && cmp -s "$T/c1" "$T/c2" &&
    cmp -s "$1/metrics.csv" "$2/metrics.csv"
}

# ---- 1. killed mid-schedule, resumed: the uninterrupted run ----------------

config seq <<INI
[loop]
max_steps = 40
checkpoint_every_n_steps = 3
[plugins]
step = lstsq
optimizer = sgd
scheduler = lrs:sequential
profiler = killer
callbacks = lr_monitor
[lr_monitor]
log_momentum = true
[sgd]
lr = 0.1
momentum = 0.9
[lrs]
schedulers = warm:linear_warmup, steps:step_lr, cycle:onecycle
milestones = 8, 20
interval = step
[warm]
start_factor = 0.1
total_iters = 8
[steps]
step_size = 3
gamma = 0.5
[cycle]
max_lr = 0.05
total_steps = 20
INI
train "$T/seq.ini" --out "$T/seq-ref"

# Taking a composite out from the command line leaves its children's
# sections unused too: noted, not refused as unknown (a regression: they
# were "unknown section [warm]"); so does dropping one child.
expect 0 "note: $T/seq.ini:19: section \\[warm\\] is unused: --set plugins.scheduler=none replaced scheduler = lrs:sequential" \
  "scheduler = none notes [lrs] and its children's sections unused" \
  -- train "$T/seq.ini" --set plugins.scheduler=none --set plugins.profiler=none \
  --set loop.max_steps=2 --out "$T/seq-none"
check "... [cycle] too, with its line" grep -Eq "seq.ini:[0-9]+: section \\[cycle\\] is unused" "$T/out"
expect 0 "section \\[cycle\\] is unused: --set lrs.schedulers=warm:linear_warmup, steps:step_lr replaced schedulers = warm:linear_warmup, steps:step_lr, cycle:onecycle" \
  "dropping a child of lrs notes its section unused" \
  -- train "$T/seq.ini" --set "lrs.schedulers=warm:linear_warmup, steps:step_lr" \
  --set lrs.milestones=8 --set plugins.profiler=none --set loop.max_steps=2 \
  --out "$T/seq-two"
expect 2 "unknown section \\[warmup\\]" "a section nothing ever named is still unknown" \
  -- train "$T/seq.ini" --set plugins.scheduler=none --set warmup.x=1 \
  --set plugins.profiler=none --out "$T/seq-bad"
check "a sequential of linear_warmup, step_lr and onecycle trains 40 steps" \
  test "$(column lr "$T/seq-ref/metrics.csv" | wc -l)" -eq 40
# 8 steps of warm-up to 0.1, step_lr from 0.1 (its closed form at 0)
check "the warm-up reaches the initial rate at the first milestone, step_lr starts from it" \
  test "$(column lr "$T/seq-ref/metrics.csv" | sed -n 9p)" = 0.10000000000000001
check "onecycle moves the momentum after the second milestone only" \
  test "$(column momentum "$T/seq-ref/metrics.csv" | sed -n '1p;20p' | sort -u | wc -l)" -eq 1 -a \
  "$(column momentum "$T/seq-ref/metrics.csv" | sed -n 25p)" != 0.90000000000000002
for kill in 5 9 21 33; do
  rm -rf "$T/seq-kill"
  LK_KILL=optimizer_step:$kill train "$T/seq.ini" --out "$T/seq-kill"
  check "... killed at step $kill: rows to $((kill - 1)) only" \
    test "$(column lr "$T/seq-kill/metrics.csv" | wc -l)" -eq $((kill - 1))
  train "$T/seq.ini" --resume "$T/seq-kill/checkpoints/last.ckpt"
  check "sequential killed at step $kill and resumed: the uninterrupted run (dump, lr, momentum, metrics.csv)" \
    same_run "$T/seq-ref" "$T/seq-kill"
done

config chain <<INI
[loop]
max_epochs = 9
[plugins]
step = linreg
data = synthetic
optimizer = adam
scheduler = chained
profiler = killer
[synthetic]
n_train = 24
batch_size = 8
[adam]
lr = 0.05
[chained]
schedulers = warm:constant, restarts:cosine_warm_restarts, phases:sequential
[warm]
factor = 0.25
total_iters = 2
[restarts]
T_0 = 2
T_mult = 2
[phases]
schedulers = a:exponential, b:polynomial
milestones = 4
[a]
gamma = 0.8
[b]
total_iters = 3
INI
train "$T/chain.ini" --out "$T/chain-ref"
check "a chained scheduler at interval = epoch: one rate an epoch, 9 of them" \
  test "$(column lr "$T/chain-ref/metrics.csv" | grep . | uniq | wc -l)" -eq 9
check "... its children take its interval (config.ini records it)" \
  sh -c "grep -A4 '^\[phases\]' '$T/chain-ref/config.ini' | grep -qx 'interval = epoch' &&
         grep -A4 '^\[b\]' '$T/chain-ref/config.ini' | grep -qx 'interval = epoch'"
train "$T/chain-ref/config.ini" --out "$T/chain-again"
check "... and a run of the effective config.ini is the same run" \
  cmp -s "$T/chain-ref/metrics.csv" "$T/chain-again/metrics.csv"
for kill in 4 13 20; do
  rm -rf "$T/chain-kill"
  LK_KILL=optimizer_step:$kill train "$T/chain.ini" --out "$T/chain-kill"
  check "... killed at step $kill: rows to $((kill - 1)) only" \
    test "$(column lr "$T/chain-kill/metrics.csv" | grep -c .)" -eq $((kill - 1))
  train "$T/chain.ini" --resume "$T/chain-kill/checkpoints/last.ckpt"
  check "chained (with a sequential in it) killed at step $kill and resumed: the uninterrupted run" \
    same_run "$T/chain-ref" "$T/chain-kill"
done

# ---- 2. the model and the scheduler of sequential.so ----------------------

check "inspect sequential: the model's and the scheduler's kinds and options" \
  sh -c "'$LOOPKIT' inspect sequential >'$T/inspect' &&
         grep -q 'step,backward,scheduler' '$T/inspect' &&
         grep -Eq '^  layers ' '$T/inspect' && grep -Eq '^  schedulers ' '$T/inspect' &&
         grep -Eq '^  milestones ' '$T/inspect'"

config iris <<INI
[loop]
max_epochs = 4
[plugins]
step = sequential
data = csv
optimizer = sgd
scheduler = lrs:sequential
[csv]
path = $IRIS
skip_rows = 1
header = false
batch_size = 50
normalize = standard
[sequential]
layers = linear(8), relu, linear(3)
[sgd]
lr = 0.1
[lrs]
schedulers = warm:constant, main:exponential
milestones = 2
[warm]
factor = 0.5
total_iters = 2
[main]
gamma = 0.5
INI
expect 0 'trained 12 steps' "the sequential model with a sequential scheduler named lrs" \
  -- train "$T/iris.ini" --out "$T/iris"
check "... its rates by epoch: 0.05, 0.05, then torch's step(0) at the milestone (0.1), 0.05" \
  test "$(column lr "$T/iris/metrics.csv" | grep . | uniq | tr '\n' ' ')" = \
  "0.050000000000000003 0.10000000000000001 0.050000000000000003 "
check "... the model's section records no scheduler option but interval" \
  sh -c "! sed -n '/^\[sequential\]/,/^\[/p' '$T/iris/config.ini' | grep -Eq '^(schedulers|milestones) '"
expect 0 'trained 12 steps' "... and its effective config.ini runs again" \
  -- train "$T/iris/config.ini" --out "$T/iris-again"
check "... to the same metrics" cmp -s "$T/iris/metrics.csv" "$T/iris-again/metrics.csv"

expect 2 'iris.ini:19: \[lrs\] gives both layers \(the model\) and schedulers' \
  "layers and schedulers in one section: exit 2, file:line" \
  -- train "$T/iris.ini" --out "$T/r" --set "lrs.layers=linear(3)"
expect 2 'iris.ini:15: \[sequential\] gives layers, the model, but the instance is also the scheduler.*scheduler = lrs:sequential' \
  "one instance named sequential for the model and the scheduler: exit 2, telling to name them apart" \
  -- train "$T/iris.ini" --out "$T/r" --set plugins.scheduler=sequential
expect 2 'gives schedulers, the scheduler .*, but the instance is also the model' \
  "the model role given the scheduler's instance: exit 2" \
  -- train "$T/iris.ini" --out "$T/r" --set plugins.step=lrs:sequential
expect 2 'gives schedulers, the scheduler .*, but the instance is not the scheduler' \
  "the model role given a scheduler instance, and no scheduler: exit 2" \
  -- train "$T/iris.ini" --out "$T/r" --set plugins.step=lrs:sequential \
  --set plugins.scheduler=none
expect 2 'gives neither layers .* nor schedulers and milestones' \
  "neither layers nor schedulers: exit 2" \
  -- train "$T/iris.ini" --out "$T/r" --set plugins.scheduler=other:sequential
check "nothing refused left a run directory" test ! -e "$T/r"

# ---- 3. config errors: exit 2, file:line -----------------------------------

config bad <<INI
[loop]
max_steps = 5
[plugins]
step = lstsq
optimizer = sgd
scheduler = lrs:sequential
[lrs]
schedulers = warm:linear_warmup, main:cosine
milestones = 3
interval = step
[main]
T_max = 4
[sgd]
lr = 0.001
INI
expect 0 'trained 5 steps' "the base config trains" -- train "$T/bad.ini" --out "$T/ok"
# variant NAME SED: bad.ini edited, as $T/NAME.ini (line numbers kept).
variant() { sed "$2" "$T/bad.ini" >"$T/$1.ini"; }
# refused PATTERN DESC SED [LINES]: the variant, LINES appended, exits 2
# with PATTERN.
refused() {
  variant v "$3"
  [ $# -gt 3 ] && printf '%s\n' "$4" >>"$T/v.ini"
  expect 2 "$1" "$2" -- train "$T/v.ini" --out "$T/r"
}
refused 'v.ini:8: option lrs.schedulers: sgd \(.*sgd.so\) cannot be a scheduler of lrs:sequential: it implements optimizer' \
  "a child that is not a scheduler" 's/^schedulers = .*/schedulers = warm:linear_warmup, sgd/'
refused 'v.ini:8: option lrs.schedulers: scheduler main:cosine is used twice: it is already a scheduler of lrs:sequential' \
  "a child named twice" 's/^schedulers = .*/schedulers = main:cosine, main:cosine/'
refused 'v.ini:18: option inner.schedulers: scheduler main:cosine is used twice: it is already a scheduler of chained' \
  "a child of two parents" 's/^scheduler = .*/scheduler = chained/' \
  "$(printf '[chained]\nschedulers = main:cosine, inner:sequential\n[inner]\nschedulers = main:cosine')"
refused 'v.ini:8: option lrs.schedulers: name main is used twice: for plugin step_lr here and for plugin cosine' \
  "one name for two plugins" 's/^schedulers = .*/schedulers = main:cosine, main:step_lr/'
refused 'v.ini:8: option lrs.schedulers: lrs:sequential cannot be a scheduler of itself' \
  "a sequential of itself" 's/^schedulers = .*/schedulers = warm:linear_warmup, lrs:sequential/'
refused 'v.ini:11: unknown section \[main\]' "an unknown child section (the list names another)" \
  's/^schedulers = .*/schedulers = warm:linear_warmup, mian:constant/'
refused 'v.ini:8: option lrs.schedulers = warm:linear_warmup, , main:cosine: item 2 is empty' \
  "an empty item in the list" 's/^schedulers = .*/schedulers = warm:linear_warmup, , main:cosine/'
refused 'v.ini:9: option lrs.milestones = 3,2: value 2 \(2\) must be larger than the one before' \
  "milestones that do not increase" 's/^milestones = .*/milestones = 3,2/'
refused 'v.ini:9: option lrs.milestones = 2.5: value 1 \(2.5\) must be a whole number' \
  "a milestone that is no whole number" 's/^milestones = .*/milestones = 2.5/'
refused 'v.ini:9: option lrs.milestones = 3,4: Sequential Schedulers expects number of schedulers provided to be one more than the number of milestone points' \
  "one milestone too many" 's/^milestones = .*/milestones = 3,4/'
refused 'v.ini:9: option lrs.milestones: expected a comma list of numbers, got "3;4"' \
  "a milestone list that is no list" 's/^milestones = .*/milestones = 3;4/'
refused 'v.ini:9: option lrs.milestones = 0: value 1 must be >= 1' "a milestone 0" \
  's/^milestones = .*/milestones = 0/'
refused 'v.ini:8: option lrs.schedulers: plateau:reduce_on_plateau cannot be a scheduler of sequential' \
  "reduce_on_plateau in a sequential (torch's SequentialLR cannot step it)" \
  's/^schedulers = .*/schedulers = warm:linear_warmup, plateau:reduce_on_plateau/'
refused 'v.ini:8: option lrs.schedulers: c:chained cannot be a scheduler of sequential' \
  "chained in a sequential" \
  's/^schedulers = .*/schedulers = warm:linear_warmup, c:chained/' \
  "$(printf '[c]\nschedulers = x:constant')"
refused 'v.ini:16: option warm.interval = epoch: scheduler warm:linear_warmup steps when its parent lrs:sequential does, at interval = step' \
  "a child at another interval than its parent" 's/^T_max/T_max/' \
  "$(printf '[warm]\ninterval = epoch')"
refused 'v.ini:8: option chained.schedulers: lstsq \(.*\) cannot be a scheduler of chained: it implements step,backward' \
  "a chained of a model" 's/^scheduler = .*/scheduler = chained\n[chained]\nschedulers = lstsq/'
refused 'plugin chained: missing required option "schedulers"' "chained without schedulers" \
  's/^scheduler = .*/scheduler = chained/'
check "nothing refused left a run directory" test ! -e "$T/r"

# ---- 4. a scheduler built for ABI 1.4 (no restart entry) ------------------

V14=$LK_ABI_DIR/scheduler_v14.so
expect 0 'abi: +1\.4' "the template scheduler built against the 1.4 headers" -- inspect "$V14"
refused "v.ini:8: option lrs.schedulers: old:.*scheduler_v14.so cannot be a scheduler of sequential: .*nor has a plugin built before ABI 1.5" \
  "a 1.4 scheduler in a sequential is refused, naming it" \
  "s|^schedulers = .*|schedulers = warm:linear_warmup, old:$V14|"
sed -n '1,5p' "$T/bad.ini" >"$T/old14.ini"
printf 'scheduler = chained\n[chained]\nschedulers = old:%s\ninterval = step\n[old]\ngamma = 0.5\n[sgd]\nlr = 0.01\n' \
  "$V14" >>"$T/old14.ini"
expect 0 'trained 5 steps' "a 1.4 scheduler in a chained steps: chained needs nothing of 1.5" \
  -- train "$T/old14.ini" --out "$T/old14"
check "... halving the rate every step, at its parent's interval" \
  test "$(column lr "$T/old14/metrics.csv" | tr "\\n" " ")" = "0.01 0.0050000000000000001 0.0025000000000000001 0.00125 0.00062500000000000001 "

finish

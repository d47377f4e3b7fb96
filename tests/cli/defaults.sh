#!/bin/sh
# Every bundled plugin's declared defaults against torch's: each plugin is
# listed below with the torch class it follows, or with why it has none;
# each argument of that class's constructor (tests/data/torch_defaults.ref,
# written by tests/torch/defaults_reference.py from torch 1.13) must be an
# option of the plugin with the same default, or be listed as a deliberate
# difference with its reason. A plugin that `loopkit plugins` finds and
# this table does not list fails the test, so a new one cannot slip by.
. "$LK_SRCDIR/tests/cli/lib.sh"
REF=$LK_SRCDIR/tests/data/torch_defaults.ref

# PLUGIN CLASS-or-"-" WHY: the torch class whose constructor a plugin takes
# its options and defaults from ("-": torch has none; WHY says so).
cat >"$T/classes" <<'TABLE'
sgd SGD
adam Adam
adamw AdamW
rmsprop RMSprop
adagrad Adagrad
adadelta Adadelta
adamax Adamax
asgd ASGD
nadam NAdam
radam RAdam
rprop Rprop
lbfgs LBFGS
step_lr StepLR
multistep MultiStepLR
exponential ExponentialLR
constant ConstantLR
linear_warmup LinearLR
polynomial PolynomialLR
cosine CosineAnnealingLR
cosine_warm_restarts CosineAnnealingWarmRestarts
cyclic CyclicLR
onecycle OneCycleLR
reduce_on_plateau ReduceLROnPlateau
chained ChainedScheduler
sequential SequentialLR the scheduler half; its model half (layers) follows nn.Sequential, whose layers have no constructor defaults of their own
sam - SAM is not in torch (a paper's optimizer around a base one)
gsl_bfgs - GSL's BFGS, not torch's
liblbfgs - liblbfgs's L-BFGS, not torch's
early_stopping - Lightning's EarlyStopping, not torch's (Lightning is not in Debian)
checkpoint - Lightning's ModelCheckpoint, not torch's
lr_monitor - Lightning's LearningRateMonitor, not torch's
ema - a weight average as timm's ModelEmaV2, not a torch class
idx - a data set: its options are a file's layout and a DataLoader's batch size
csv - a data set
npy - a data set
text - a data set (nanoGPT's windows of a byte file)
gpt - nanoGPT's model (GPTConfig is not torch's)
mlp - a network of nn.Linear layers; layers is its shape
linear - a model
softmax - a model
lstsq - a test problem
rosenbrock - a test problem
numeric - central differences of any step plugin
zero - zero_grad
single - one process
mpi - DistributedDataParallel's role; no options
simple - Lightning's SimpleProfiler
trace - a profiler (Chrome trace events)
tensorboard - torch.utils.tensorboard.SummaryWriter's options, not a constructor of torch.optim
bf16-mixed - Lightning's Trainer(precision='bf16-mixed'), not a torch class; no options
TABLE

# PLUGIN ARGUMENT LOOPKIT-DEFAULT WHY: differences on purpose. "absent" for
# an argument the plugin does not take.
cat >"$T/differ" <<'TABLE'
cosine T_max auto torch requires it: auto is the run's length in steps or epochs
onecycle total_steps auto torch's None needs epochs and steps_per_epoch: auto is the run's length
onecycle epochs 0 0 is torch's None
onecycle steps_per_epoch 0 0 is torch's None
cyclic step_size_down -1 -1 is torch's None (step_size_up)
cyclic scale_fn absent a Python function; scale_mode and the built-in modes cover torch's
cyclic scale_mode mode torch's cycle is overridden by each built-in mode's own when scale_fn is None: mode says so
lbfgs max_eval 0 0 is torch's None (max_iter * 5 / 4)
lbfgs line_search_fn none none is torch's None
sequential schedulers empty one plugin is the model or the scheduler: the scheduler refuses an empty list at create, as torch requires one
sequential milestones empty as schedulers: required of the scheduler at create
TABLE

# The plugins this loopkit finds (optional ones may be absent).
"$LOOPKIT" plugins 2>/dev/null | awk 'NF >= 4 && $4 ~ /\.so$/ && $4 !~ /\/tests\// { print $1 }' | sort -u >"$T/found"
missing=
while read -r p; do
  grep -q "^$p " "$T/classes" || missing="$missing $p"
done <"$T/found"
check "every bundled plugin is listed, with its torch class or why it has none${missing:+ (not:$missing)}" \
  test -z "$missing"
check "... which is most of them" test "$(wc -l <"$T/found")" -ge 40

# defaults PLUGIN: "OPTION DEFAULT" lines of loopkit inspect; (required) as
# required, an empty default as empty.
defaults() {
  "$LOOPKIT" inspect "$1" | awk '
    /^options:/ { on = 1; next }
    /^[a-z]/ { on = 0 }
    on && /^  [^ ]/ {
      d = $0; sub(/.* default ?/, "", d)
      if (d == "(required)") d = "required"
      if (d == "") d = "empty"
      print $1, d
    }'
}

# same A B: two defaults alike: equal text, or equal numbers (each of a
# comma list), true/false as torch's bools.
same() {
  [ "$1" = "$2" ] && return 0
  awk -v a="$1" -v b="$2" 'BEGIN {
    n = split(a, x, ","); m = split(b, y, ",")
    if (n != m) exit 1
    for (i = 1; i <= n; i++) {
      if (x[i] !~ /^[-+0-9.eE]+$/ || y[i] !~ /^[-+0-9.eE]+$/) exit 1
      if (x[i] + 0 != y[i] + 0) exit 1
    }
    exit 0 }'
}

checked=0
while read -r p class why; do
  [ "$class" = - ] && continue
  grep -qx "$p" "$T/found" || continue
  defaults "$p" >"$T/mine"
  bad=
  n_args=0
  while read -r c arg torch; do
    [ "$c" = "$class" ] || continue
    n_args=$((n_args + 1))
    mine=$(awk -v a="$arg" '$1 == a { print $2 }' "$T/mine")
    [ -n "$mine" ] || mine=absent
    listed=$(awk -v p="$p" -v a="$arg" '$1 == p && $2 == a { print $3 }' "$T/differ")
    if [ -n "$listed" ]; then
      [ "$listed" = "$mine" ] || bad="$bad $arg=$mine (listed as $listed)"
    elif ! same "$mine" "$torch"; then
      bad="$bad $arg=$mine (torch: $torch)"
    fi
  done <"$REF"
  check "$p: torch's $class defaults ($n_args arguments)${bad:+; differ:$bad}" \
    sh -c "[ -z '$bad' ] && [ $n_args -gt 0 ]"
  checked=$((checked + 1))
done <"$T/classes"
check "... $checked plugins held against torch" test "$checked" -ge 24

finish

#!/bin/sh
# Every bundled plugin's declared defaults against torch's and Lightning's:
# each plugin is listed below with the torch or Lightning class it follows,
# or with why it has none; each argument of that class's constructor
# (tests/data/torch_defaults.ref, written by
# tests/torch/defaults_reference.py from torch 1.13, and
# tests/data/lightning_defaults.ref, written by hand) must be an option of
# the plugin with the same default, or be listed as a deliberate
# difference with its reason (loopkit.ini(5) gives them too). A plugin
# that `loopkit plugins` finds and this table does not list fails the
# test, so a new one cannot slip by. The same for the [loop] keys against
# Lightning's Trainer, and for the layers' arguments (sequential's, as
# loopkit.ini(5) documents them, and gpt's options) against torch.nn's.
. "$LK_SRCDIR/tests/cli/lib.sh"
: "${LK_BUILDDIR:?}"
MAN=$LK_BUILDDIR/man/loopkit.ini.5
cat "$LK_SRCDIR/tests/data/torch_defaults.ref" \
  "$LK_SRCDIR/tests/data/lightning_defaults.ref" >"$T/ref"
REF=$T/ref

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
early_stopping EarlyStopping
checkpoint ModelCheckpoint
lr_monitor LearningRateMonitor
ema get_ema_multi_avg_fn
idx DataLoader
csv DataLoader
npy DataLoader
text DataLoader
gpt - nanoGPT's model (GPTConfig is not torch's); its layers' options are held against torch.nn's below
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
tensorboard SummaryWriter
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
early_stopping monitor val_loss what every bundled step plugin's validation logs (Lightning 2 requires it); one never logged is refused
early_stopping strict absent always strict: a monitor never logged is refused, as Lightning's strict=True
early_stopping stopping_threshold absent not implemented
early_stopping divergence_threshold absent not implemented
early_stopping check_on_train_epoch_end absent checks after every validation, as Lightning's None with a validation
early_stopping log_rank_zero_only absent only rank 0 logs
checkpoint dirpath empty empty is None: the run directory's checkpoints/
checkpoint filename {epoch}-{step} Lightning's None is {epoch}-{step}
checkpoint monitor val_loss the callback keeps the best; the latest is the loop's last.ckpt, always written (Lightning's None keeps the latest only)
checkpoint save_last absent the loop writes last.ckpt always
checkpoint save_weights_only absent a checkpoint holds the whole run; loopkit export writes the weights
checkpoint every_n_train_steps absent [loop] checkpoint_every_n_steps
checkpoint train_time_interval absent not implemented
checkpoint every_n_epochs absent after every validation ([loop] val_every_n_epochs), as Lightning's None
checkpoint save_on_train_epoch_end absent after validation, as Lightning's None with a validation
checkpoint enable_version_counter absent a run directory is never written twice: names cannot collide
lr_monitor logging_interval step Lightning's None follows each scheduler's interval; step logs the rate every step used
lr_monitor log_weight_decay absent not implemented
tensorboard log_dir absent the run directory (sub_dir below it)
tensorboard comment absent the run directory names the run
tensorboard purge_step absent a resumed run writes a file of its own
tensorboard filename_suffix absent not implemented
idx batch_size 64 a batch of one is never what a training run wants (Lightning users pass one)
idx shuffle true the training split is shuffled (DataLoader's None is unshuffled; Lightning users pass shuffle=True for training)
csv batch_size 64 as idx's
csv shuffle true as idx's
npy batch_size 64 as idx's
npy shuffle true as idx's
text batch_size 12 nanoGPT's batch_size
text shuffle absent every training window starts at a random position
text drop_last absent every training batch is whole
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
  check "$p: $class's defaults ($n_args arguments)${bad:+; differ:$bad}" \
    sh -c "[ -z '$bad' ] && [ $n_args -gt 0 ]"
  checked=$((checked + 1))
done <"$T/classes"
check "... $checked plugins held against torch and Lightning" test "$checked" -ge 32

# ---- the layers' arguments against torch.nn's ----

# sequential's layers as loopkit.ini(5) documents them, LAYER ARG DEFAULT
# for each argument with a default (the built page: its layers are the
# template's).
awk '
  /^\.SH "THE LAYERS OF SEQUENTIAL"/ { on = 1; next }
  /^\.SH/ { on = 0 }
  on && match($0, /\\fB[a-z0-9]+\\fR\(/) {
    line = $0; gsub(/\\-/, "-", line)
    match(line, /\\fB[a-z0-9]+\\fR\(/)
    name = substr(line, RSTART + 3, RLENGTH - 7)
    rest = substr(line, RSTART + RLENGTH)
    while (match(rest, /\\fI[a-z_]+\\fR=[^,)]*/)) {
      kv = substr(rest, RSTART, RLENGTH); rest = substr(rest, RSTART + RLENGTH)
      arg = kv; sub(/^\\fI/, "", arg); sub(/\\fR=.*/, "", arg)
      val = kv; sub(/^[^=]*=/, "", val); gsub(/\\f[IRB]/, "", val)
      if (val != "") print "sequential", name "." arg, val
    }
  }' "$MAN" >"$T/layer_args"
# gpt's options that are a layer's: PLUGIN OPTION, from loopkit inspect.
for o in dropout bias; do
  defaults gpt | awk -v o="$o" '$1 == o { print "gpt", $1, $2 }'
done >>"$T/layer_args"
check "loopkit.ini(5) documents the layers' defaults ($(wc -l <"$T/layer_args") found)" \
  test "$(wc -l <"$T/layer_args")" -ge 15

# against CLASS ARG P KEY MINE: sets bad to what is wrong with P's KEY =
# MINE against CLASS(ARG) of the reference, or to nothing: the same
# default, or the difference the differ table lists for P KEY.
against() {
  torch=$(awk -v c="$1" -v a="$2" '$1 == c && $2 == a { print $3 }' "$REF")
  listed=$(awk -v p="$3" -v a="$4" '$1 == p && $2 == a { print $3 }' "$T/differ")
  bad=
  if [ -z "$torch" ]; then
    bad="$1($2) is not in the reference"
  elif [ -n "$listed" ]; then
    [ "$listed" = "$5" ] || bad="$5, listed as $listed"
  elif ! same "$5" "$torch"; then
    bad="$5, $1($2=$torch)"
  fi
}

# LAYER-or-OPTION torch CLASS and ARGUMENT ("-": the documented name).
cat >"$T/layer_classes" <<'TABLE'
conv2d Conv2d -
maxpool2d MaxPool2d -
avgpool2d AvgPool2d -
batchnorm2d BatchNorm2d -
layernorm LayerNorm -
gelu GELU -
dropout Dropout -
flatten Flatten -
linear Linear -
embedding Embedding -
leakyrelu LeakyReLU -
elu ELU -
softplus Softplus -
conv1d Conv1d -
maxpool1d MaxPool1d -
lstm LSTM -
gpt.dropout Dropout p
gpt.bias Linear bias
TABLE
cat >>"$T/differ" <<'TABLE'
sequential maxpool2d.stride kernel_size torch's None: the window's size
sequential avgpool2d.stride kernel_size torch's None: the window's size
sequential maxpool1d.stride kernel_size torch's None: the window's size
sequential gelu.approximate tanh the layer kit has the tanh form only; approximate='none' is refused, not approximated unseen
gpt dropout 0 nanoGPT's GPTConfig.dropout = 0.0: the probability of its nn.Dropout(p) layers
TABLE
while read -r p where mine; do
  layer=${where%%.*} arg=${where#*.}
  [ "$p" = gpt ] && layer=gpt.$where
  class=$(awk -v l="$layer" '$1 == l { print $2 }' "$T/layer_classes")
  targ=$(awk -v l="$layer" '$1 == l { print $3 }' "$T/layer_classes")
  [ "$targ" = - ] && targ=$arg
  against "${class:-?}" "$targ" "$p" "$where" "$mine"
  check "$p $where = $mine: torch's ${class:-?} ${targ:-?}${bad:+; differs: $bad}" test -z "$bad"
done <"$T/layer_args"

# The code's defaults are the documented ones: each sequential layer's
# argument left out trains the same parameters and state (batch norm's
# running statistics) as given its documented default (two SGD steps on
# tests/data/sequential's images).
cat >"$T/nets" <<'TABLE'
conv2d conv2d(2, 3, @), flatten, linear(3)
maxpool2d maxpool2d(2, @), flatten, linear(3)
avgpool2d avgpool2d(2, @), flatten, linear(3)
batchnorm2d batchnorm2d(@), flatten, linear(3)
layernorm flatten, layernorm(@), linear(3)
gelu flatten, gelu(@), linear(3)
dropout flatten, dropout(@), linear(3)
flatten flatten(@), linear(3)
linear flatten, linear(3, @)
leakyrelu flatten, linear(8), leakyrelu(@), linear(3)
elu flatten, linear(8), elu(@), linear(3)
softplus flatten, linear(8), softplus(@), linear(3)
conv1d flatten(2), conv1d(2, 3, @), flatten, linear(3)
maxpool1d flatten(2), maxpool1d(2, @), flatten, linear(3)
lstm flatten(2), lstm(4, @), flatten, linear(3)
TABLE
cat >"$T/net.ini" <<INI
[loop]
max_steps = 2
[plugins]
step = sequential
optimizer = sgd
data = idx
[idx]
dir = $LK_SRCDIR/tests/data/sequential
batch_size = 4
shuffle = false
normalize = scale
[sgd]
lr = 0.1
INI
n_run=0
while read -r p where val; do
  [ "$p" = sequential ] || continue
  layer=${where%%.*} arg=${where#*.}
  net=$(awk -v l="$layer" '$1 == l { sub(/^[^ ]+ /, ""); print }' "$T/nets")
  [ "$val" = kernel_size ] && val=2 # the nets' pools are 2 x 2
  plain=$(echo "$net" | sed 's/, @//; s/@//')
  given=$(echo "$net" | sed "s/@/$arg=$val/")
  n_run=$((n_run + 1))
  for f in plain given; do
    eval "layers=\$$f"
    "$LOOPKIT" train "$T/net.ini" --quiet --out "$T/net$n_run$f" \
      --set "sequential.layers=$layers" >"$T/net.out" 2>&1 &&
      python3 "$LK_SRCDIR/tests/cli/ckpt_edit.py" \
        "$T/net$n_run$f/checkpoints/last.ckpt" --dump >"$T/net$n_run$f.dump"
  done
  check "sequential $layer without $arg trains as with $arg=$val (${net:-no net listed})" \
    sh -c "[ -s '$T/net${n_run}plain.dump' ] && cmp -s '$T/net${n_run}plain.dump' '$T/net${n_run}given.dump'"
done <"$T/layer_args"

# ---- the [loop] keys against Lightning's Trainer ----

# KEY TRAINER-ARGUMENT ("-": none; the rest of the line says why).
cat >"$T/loop_keys" <<'TABLE'
max_epochs max_epochs
max_steps max_steps
accumulate_grad_batches accumulate_grad_batches
gradient_clip_val gradient_clip_val
gradient_clip_algorithm gradient_clip_algorithm
val_every_n_epochs check_val_every_n_epoch
val_check_interval val_check_interval
log_every_n_steps log_every_n_steps
terminate_on_nan - Lightning 1.x's Trainer(terminate_on_nan=False), removed in 2.0
manual_optimization - LightningModule.automatic_optimization = True, its negation
seed - seed_everything's, not the Trainer's; 0 makes every run repeatable
checkpoint_every_n_steps - ModelCheckpoint's every_n_train_steps (None: off)
keep_last - ModelCheckpoint's save_top_k of the step files (none: last.ckpt only)
threads - torch.set_num_threads's, not the Trainer's
test_ckpt - trainer.test's ckpt_path; None with the model given is the weights training ended with
TABLE
cat >>"$T/differ" <<'TABLE'
loop max_epochs 1 one epoch when max_steps is not given (Lightning's None is 1000), unlimited with max_steps as Lightning's
loop gradient_clip_val 0 0 is Lightning's None: no clipping
loop val_check_interval 0 0 is Lightning's 1.0: at each epoch's end only; N is Lightning's int form, every N steps
TABLE
# The keys as loopkit.ini(5) lists them from the program's own table.
awk '/^\.SH "\[loop\]"/ { on = 1; next } /^\.SH/ { on = 0 }
  on && /^\\fB[a-z_]+\\fR \(.*default / {
    k = $0; sub(/^\\fB/, "", k); sub(/\\fR.*/, "", k)
    d = $0; sub(/.*default /, "", d); sub(/\)$/, "", d); gsub(/\\-/, "-", d)
    print k, d }' "$MAN" >"$T/loop_defaults"
check "loopkit.ini(5) lists the [loop] keys ($(wc -l <"$T/loop_defaults") found)" \
  test "$(wc -l <"$T/loop_defaults")" -ge 15
while read -r key mine; do
  row=$(awk -v k="$key" '$1 == k' "$T/loop_keys")
  targ=$(echo "$row" | awk '{ print $2 }')
  if [ -z "$row" ]; then
    check "[loop] $key is listed with its Trainer argument or why it has none" false
    continue
  fi
  [ "$targ" = - ] && continue
  against Trainer "$targ" loop "$key" "$mine"
  check "[loop] $key = $mine: Lightning's Trainer($targ)${bad:+; differs: $bad}" test -z "$bad"
done <"$T/loop_defaults"

finish

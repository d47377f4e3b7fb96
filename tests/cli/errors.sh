#!/bin/sh
# Every error exit loopkit(1) documents: status 2 when nothing was
# trained, 1 when the run started and failed, and a message naming the
# culprit (file:line, plugin and path, option and accepted values).
. "$LK_SRCDIR/tests/cli/lib.sh"
B=${LK_BROKEN_DIR:?}

# ---- usage ----
expect 2 'usage: loopkit COMMAND' "no command: usage, status 2" --
expect 2 'unknown command "frobnicate"' "unknown command" -- frobnicate
expect 2 'no config file' "train without a config" -- train
expect 2 'unknown option "--bogus"' "unknown train option" -- train x.ini --bogus
expect 2 '--out needs a value' "option without its value" -- train x.ini --out
expect 2 'cannot open config .*/missing.ini' "missing config file" -- train "$T/missing.ini"

# ---- config syntax and keys ----
config good <<'INI'
[loop]
max_steps = 3
[plugins]
step = rosenbrock
optimizer = sgd
[sgd]
lr = 0.001
INI
printf '[loop]\nmax_steps = 3\nthis is not ini\n' >"$T/syntax.ini"
expect 2 'syntax.ini:3: ' "syntax error names file:line" -- train "$T/syntax.ini"
printf '[loop]\nmax_step = 3\n[plugins]\nstep = rosenbrock\noptimizer = sgd\n' >"$T/key.ini"
expect 2 'key.ini:2: unknown key "max_step" in \[loop\]; accepted: max_epochs, max_steps' \
  "unknown [loop] key names file:line and lists keys" -- train "$T/key.ini"
printf '[loop]\nmax_steps = many\n[plugins]\nstep = rosenbrock\noptimizer = sgd\n' >"$T/val.ini"
expect 2 'val.ini:2: loop.max_steps = "many": expected an integer' \
  "malformed [loop] value" -- train "$T/val.ini"
printf '[loop]\nmax_steps = 3\nterminate_on_nan = yes\n[plugins]\nstep = rosenbrock\noptimizer = sgd\n' >"$T/bool.ini"
expect 2 'bool.ini:3: .*expected true or false' "malformed boolean" -- train "$T/bool.ini"
printf '[loop]\nmax_steps = 3\ngradient_clip_algorithm = max\n[plugins]\nstep = rosenbrock\noptimizer = sgd\n' >"$T/enum.ini"
expect 2 'enum.ini:3: .*expected one of norm\|value' "malformed enum" -- train "$T/enum.ini"
printf '[loop]\nmax_steps = 3\n[plugins]\nstep = rosenbrock\noptimizer = sgd\n[adam]\nlr = 1\n[sgd]\nlr = 1\n' >"$T/sect.ini"
expect 2 'sect.ini:6: unknown section \[adam\].*accepted sections: loop, plugins' \
  "unknown section" -- train "$T/sect.ini"
printf '[loop]\nmax_steps = 3\n[plugins]\noptimizer = sgd\n' >"$T/nostep.ini"
expect 2 'step is required' "missing step" -- train "$T/nostep.ini"
printf '[loop]\nmax_steps = 3\n[plugins]\nstep = rosenbrock\n' >"$T/noopt.ini"
expect 2 'optimizer is required unless manual_optimization' "missing optimizer" -- train "$T/noopt.ini"
printf '[plugins]\nstep = rosenbrock\noptimizer = sgd\n' >"$T/nosteps.ini"
expect 2 'without a data plugin .* set \[loop\] max_steps' "max_steps required without data" -- train "$T/nosteps.ini"
printf '[plugins]\nstep = rosenbrock\noptimizer = sgd\nprofiler = simple\nwhat = 1\n' >"$T/role.ini"
expect 2 'role.ini:5: unknown key "what" in \[plugins\]; accepted: step' "unknown [plugins] key" -- train "$T/role.ini"

# ---- --set ----
expect 2 '--set "loop": expected SECTION.KEY=VALUE' "malformed --set" -- train "$T/good.ini" --set loop
expect 2 '--set loop.max_epoch=2: unknown key "max_epoch"' "--set of an unknown key names the --set" \
  -- train "$T/good.ini" --set loop.max_epoch=2
expect 2 '--set sgd.lr=fast: option sgd.lr: expected a number, got "fast"' \
  "--set with a bad option value" -- train "$T/good.ini" --set sgd.lr=fast

# ---- plugins ----
expect 2 'plugin nosuch not found; tried: .*/nosuch.so' "unknown plugin lists the paths tried" \
  -- train "$T/good.ini" --set plugins.optimizer=nosuch
expect 2 'invalid plugin name "s!gd"' "bad plugin name refused" -- train "$T/good.ini" --set 'plugins.optimizer=s!gd'
expect 2 'plugin rosenbrock .*rosenbrock.so\) cannot be the optimizer: it implements step,backward' \
  "plugin of the wrong kind" -- train "$T/good.ini" --set plugins.optimizer=rosenbrock
printf '[loop]\nmax_steps = 3\n[plugins]\nstep = rosenbrock\noptimizer = sgd\n[sgd]\nlr = 0.1\nbeta = 2\n' >"$T/opt.ini"
expect 2 'opt.ini:8: unknown option "beta" for plugin sgd; accepted: lr, momentum' \
  "unknown plugin option lists accepted ones" -- train "$T/opt.ini"
expect 2 'option rosenbrock.dtype: expected one of f64\|f32, got "f16"' "bad enum option" \
  -- train "$T/good.ini" --set rosenbrock.dtype=f16
expect 2 'option rosenbrock.x0: expected a comma list of numbers' "bad list option" \
  -- train "$T/good.ini" --set rosenbrock.x0=1,,2
expect 2 'plugin refuse \(.*refuse.so\) failed to start: option ok = false' \
  "plugin that refuses its options" -- train "$T/good.ini" --set plugins.zero_grad=refuse
expect 2 "nodesc.so\) has no descriptor: symbol lk_plugin_descriptor" "plugin without descriptor" \
  -- train "$T/good.ini" --set "plugins.zero_grad=$B/nodesc.so"
expect 2 'built for loopkit plugin ABI 99.3; this loopkit has ABI 1.7' "ABI mismatch names both" \
  -- train "$T/good.ini" --set "plugins.zero_grad=$B/badabi.so"
expect 2 'cannot load plugin .*undefsym.so.*lk_no_such_function_anywhere' "dlopen error text" \
  -- train "$T/good.ini" --set "plugins.zero_grad=$B/undefsym.so"
expect 0 'trained 3 steps' "an optimizer built for ABI 1.0 still trains" \
  -- train "$T/good.ini" --out "$T/abi10" --set plugins.optimizer=abi10
expect 2 'scheduler step_lr needs an optimizer with a learning rate; optimizer abi10 has no get_lr/set_lr' \
  "a scheduler cannot drive an ABI 1.0 optimizer" -- train "$T/good.ini" --out "$T/abi10s" \
  --set plugins.optimizer=abi10 --set plugins.scheduler=step_lr --set step_lr.step_size=2
expect 2 'accumulate_grad_batches = 2 with manual_optimization' "manual with accumulation" \
  -- train "$T/good.ini" --set loop.manual_optimization=true --set loop.accumulate_grad_batches=2
expect 2 'gradient_clip_val with manual_optimization' "manual with clipping" \
  -- train "$T/good.ini" --set loop.manual_optimization=true --set loop.gradient_clip_val=1
expect 2 'plugin nosuch not found' "inspect of an unknown plugin" -- inspect nosuch
expect 2 'none.ckpt: no such checkpoint' "dump of a missing file" -- dump "$T/none.ckpt"
echo "not a checkpoint" >"$T/text.ckpt"
expect 2 'not a loopkit checkpoint' "dump of a foreign file" -- dump "$T/text.ckpt"

# ---- run directory ----
expect 0 'trained 3 steps' "a good config trains" -- train "$T/good.ini" --out "$T/run1" --quiet
expect 2 'already holds a run' "--out never overwrites an earlier run" -- train "$T/good.ini" --out "$T/run1"

# ---- failures during training: status 1 ----
config nan <<INI
[loop]
max_steps = 10
terminate_on_nan = true
checkpoint_every_n_steps = 1
[plugins]
step = probe
optimizer = probe
[probe]
nan_loss_at = 4
INI
expect 1 'non-finite loss nan at epoch 0, batch 4' "NaN loss stops the run" -- train "$T/nan.ini" --out "$T/nan"
check "no NaN in the last checkpoint after a NaN loss" \
  sh -c "'$LOOPKIT' dump '$T/nan/checkpoints/last.ckpt' >'$T/d' && ! grep -qi nan '$T/d' && grep -q '^w\[0\] ' '$T/d'"
expect 1 'non-finite parameter w\[1\] = nan after backward \(epoch 0, batch 2\)' \
  "NaN parameter stops the run, named" -- train "$T/nan.ini" --out "$T/nanp" \
  --set probe.nan_loss_at=-1 --set probe.nan_param_at=2
check "no NaN in the last checkpoint after a NaN parameter" \
  sh -c "'$LOOPKIT' dump '$T/nanp/checkpoints/last.ckpt' >'$T/d' && ! grep -qi nan '$T/d'"
expect 1 'training_step of plugin probe: probe failing on purpose at call 3' \
  "plugin error mid-training names plugin and call" -- train "$T/nan.ini" --out "$T/fail" \
  --set probe.nan_loss_at=-1 --set probe.fail_at=3
check "last checkpoint intact after a plugin error" \
  sh -c "'$LOOPKIT' dump '$T/fail/checkpoints/last.ckpt' | grep -q '^w\[1\] '"
expect 1 'optimizer probe returned without calling the closure' \
  "optimizer that never calls the closure" -- train "$T/nan.ini" --out "$T/lazy" \
  --set probe.nan_loss_at=-1 --set probe.evals=0
# ---- ranges declared in the option table (ABI 1.4), enforced by the host ----
config ranged <<INI
[loop]
max_steps = 3
[plugins]
step = ranged
optimizer = sgd
[sgd]
lr = 0.001
INI
expect 0 'trained 3 steps' "options inside their ranges train (inf where the range takes it)" \
  -- train "$T/ranged.ini" --out "$T/rg0"
expect 2 'option ranged.n = 0: must be >= 1 and <= 1000' "an int below its range" \
  -- train "$T/ranged.ini" --out "$T/rg1" --set ranged.n=0
expect 2 'option ranged.unit = 1: must be >= 0 and < 1' "a double at an open end" \
  -- train "$T/ranged.ini" --out "$T/rg2" --set ranged.unit=1
expect 2 'option ranged.positive = 0: must be > 0' "a double at an open lower end" \
  -- train "$T/ranged.ini" --out "$T/rg3" --set ranged.positive=0
expect 2 'option ranged.positive = inf: must be a finite number' "inf where the range does not close on it" \
  -- train "$T/ranged.ini" --out "$T/rg4" --set ranged.positive=inf
expect 2 'option ranged.betas = 0.5,2: value 2 must be >= 0 and <= 1' "a list value outside the range, named by position" \
  -- train "$T/ranged.ini" --out "$T/rg5" --set ranged.betas=0.5,2
expect 2 'option ranged.plain = nan: must be a finite number' "a double without a range must be finite" \
  -- train "$T/ranged.ini" --out "$T/rg6" --set ranged.plain=nan
check "no run directory for a refused option" sh -c "! ls -d '$T'/rg[1-6] 2>/dev/null"
expect 0 'unit +double \[0, 1\) +default 0.5' "inspect shows a double's range" -- inspect ranged
expect 0 'n +int \[1, 1000\] +default 2' "inspect shows an int's range" -- inspect ranged
expect 2 'plugin .*badrange.so .*option 1 \(lr\) declares the range ">= 0", which is not an interval such as \[0, inf\) or \(0, 1\]' \
  "a range that does not parse is refused at load" -- inspect "$LK_BROKEN_DIR/badrange.so"

# ---- the bundled plugins' ranges ----
# Every bundled plugin with numeric options declares their ranges: a value
# outside one is refused by the host before any plugin is created (exit 2,
# no run directory), naming the option, the value and the range; values at
# a closed end are taken. refused ROLE=PLUGIN KEY=VALUE WORDS [--set ...]:
# the role that loads the plugin, the refused setting, what the message
# says after "option PLUGIN.KEY = VALUE: ", and any other settings needed.
config base <<INI
[loop]
max_steps = 1
[plugins]
step = rosenbrock
optimizer = sgd
[sgd]
lr = 0.001
INI
refused() {
  role=$1 setting=$2 words=$3
  shift 3
  plugin=${role#*=}
  expect 2 "option $plugin\\.${setting%%=*} = ${setting#*=}: $words\$" \
    "$plugin: ${setting%%=*} = ${setting#*=} is refused by its range" \
    -- train "$T/base.ini" --out "$T/range" --set "plugins.$role" --set "$plugin.$setting" "$@"
}
refused optimizer=sgd momentum=-0.5 "must be >= 0"
refused optimizer=adam betas=0.9,1 "value 2 must be >= 0 and < 1"
refused optimizer=adamw eps=-1 "must be >= 0"
refused optimizer=rmsprop alpha=-1 "must be >= 0"
refused optimizer=adagrad initial_accumulator_value=-1 "must be >= 0"
refused optimizer=adadelta rho=1.5 "must be >= 0 and <= 1"
refused optimizer=adamax betas=1,0.999 "value 1 must be >= 0 and < 1"
refused optimizer=asgd weight_decay=-1 "must be >= 0"
refused optimizer=nadam momentum_decay=-1 "must be >= 0"
refused optimizer=radam eps=-1 "must be >= 0"
refused optimizer=rprop etas=0,1.2 "value 1 must be > 0"
refused optimizer=lbfgs history_size=0 "must be >= 1"
refused optimizer=sam rho=-0.1 "must be >= 0"
refused scheduler=step_lr step_size=0 "must be >= 1"
refused scheduler=cosine T_max=0 "must be >= 1"
refused scheduler=linear_warmup start_factor=0 "must be > 0 and <= 1"
refused scheduler=reduce_on_plateau factor=1 "must be >= 0 and < 1"
refused callbacks=ema decay=1 "must be >= 0 and < 1"
refused callbacks=early_stopping patience=0 "must be >= 1"
refused callbacks=checkpoint save_top_k=100001 "must be >= -1 and <= 100000"
refused data=idx batch_size=0 "must be >= 1"
refused data=csv val_split=1 "must be >= 0 and < 1" --set csv.path=none.csv
refused data=csv limit=-1 "must be >= 0" --set csv.path=none.csv
refused step=linear inputs=0 "must be >= 1"
refused step=softmax classes=1 "must be >= 2"
refused step=mlp layers=784,0,10 "value 2 must be >= 1 and <= 16777216"
refused step=rosenbrock n=1 "must be >= 2"
refused step=lstsq m=0 "must be >= 1"
check "no run directory for a refused range" test ! -e "$T/range"
# At a closed end, taken: the ranges accept what the old checks did.
expect 0 'trained 1 steps' "sgd: lr = 0 and momentum = 0 (closed ends) are taken" \
  -- train "$T/base.ini" --out "$T/ends1" --set sgd.lr=0 --set sgd.momentum=0
expect 0 'trained 1 steps' "adam: betas = 0,0 and eps = 0 are taken" \
  -- train "$T/base.ini" --out "$T/ends2" --set plugins.optimizer=adam --set adam.betas=0,0 --set adam.eps=0
expect 0 'trained 1 steps' "adadelta: rho = 0 and rho = 1 (closed ends) are taken" \
  -- train "$T/base.ini" --out "$T/ends5" --set plugins.optimizer=adadelta --set adadelta.rho=1
expect 0 'trained 1 steps' "... rho = 0 too" \
  -- train "$T/base.ini" --out "$T/ends6" --set plugins.optimizer=adadelta --set adadelta.rho=0
# Rprop's etas: one value against another, which no range says: refused
# when the plugin starts, status 2, naming the option and torch's check.
expect 2 'option etas = 0.5,1: invalid eta values, 0 < etaminus < 1 < etaplus is needed' \
  "rprop: etas = 0.5,1 is refused" -- train "$T/base.ini" --out "$T/etas" \
  --set plugins.optimizer=rprop --set rprop.etas=0.5,1
expect 0 'trained 1 steps' "linear_warmup: start_factor = 1, end_factor = 0, total_iters = 1 are taken" \
  -- train "$T/base.ini" --out "$T/ends3" --set plugins.scheduler=linear_warmup \
  --set linear_warmup.start_factor=1 --set linear_warmup.end_factor=0 --set linear_warmup.total_iters=1
expect 0 'trained 1 steps' "reduce_on_plateau: factor = 0, ema: decay = 0 are taken" \
  -- train "$T/base.ini" --out "$T/ends4" --set plugins.scheduler=reduce_on_plateau \
  --set reduce_on_plateau.factor=0 --set reduce_on_plateau.monitor=loss \
  --set reduce_on_plateau.interval=step --set plugins.callbacks=ema --set ema.decay=0
# What a plugin's create refuses beyond its option table (how many values
# a list has, an order between them) names the option's file and line, or
# its section's.
config betas <<'INI'
[loop]
max_steps = 3
[plugins]
step = rosenbrock
optimizer = adam
[adam]
lr = 0.01
betas = 0.9
INI
expect 2 'betas.ini:8: plugin adam \(.*\) failed to start: option betas has 1 values' \
  "a create-time refusal names the option's line" -- train "$T/betas.ini"
expect 2 '^loopkit: --set rprop.etas=1.5,1.2: plugin rprop .* failed to start: option etas' \
  "... or the --set that gave it" -- train "$T/good.ini" --set plugins.optimizer=rprop \
  --set rprop.etas=1.5,1.2
config lrmon <<'INI'
[loop]
max_steps = 3
[plugins]
step = rosenbrock
optimizer = abi10
callbacks = lr_monitor
[lr_monitor]
logging_interval = step
INI
expect 2 'lrmon.ini:7: plugin lr_monitor .* failed to start: the run.s optimizer has no learning rate' \
  "... or its section's first line when no option is named" -- train "$T/lrmon.ini"
finish

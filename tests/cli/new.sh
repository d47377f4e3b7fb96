#!/bin/sh
# loopkit new: for every kind (every kind of plugin src/plugin/kinds.h lists, and
# model), the installed loopkit writes a plugin project that builds with
# nothing but pkg-config loopkit (a staging install, as sdk.sh), trains as
# generated, and visibly does its job; and the refusals, which never leave
# or change anything. tests/test_new.c holds the templates themselves
# against the kinds, and tests/Makefile.inc compiles each as it is.
. "$LK_SRCDIR/tests/cli/lib.sh"
: "${LK_BUILDDIR:?}"
umask 022

make -s -C "$LK_BUILDDIR" install DESTDIR="$T/root" >"$T/install.log" 2>&1
check "make install into a staging directory" test $? -eq 0
pc=$LK_BUILDDIR/loopkit.pc
libdir=$(pkg-config --variable=libdir "$pc")
bindir=$(pkg-config --variable=exec_prefix "$pc")/bin
pluginsdir=$(pkg-config --variable=pluginsdir "$pc")

# The installed loopkit. Its compiled-in plugin directory is the real
# prefix's, so the staged bundled plugins come through LOOPKIT_PLUGIN_PATH;
# the generated plugin is found by the path its config gives, ./NAME.so.
lk() {
  LD_LIBRARY_PATH="$T/root$libdir" LOOPKIT_PLUGIN_PATH="$T/root$pluginsdir" \
    "$T/root$bindir/loopkit" "$@"
}
# lk_in DIR ARGS...: the same, run in DIR, output in $T/out.
lk_in() {
  dir=$1
  shift
  (cd "$dir" && lk "$@") >"$T/out" 2>&1
}
build() {
  PKG_CONFIG_PATH="$T/root$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$T/root" \
    make -s -C "$1" CFLAGS='-O2 -Wall -Wextra -Werror' >"$T/build.log" 2>&1
}
# near RUN TOLERANCE PARAM WANT...: each PARAM of the run's last
# checkpoint is within TOLERANCE of its WANT.
near() {
  run=$1 tol=$2
  shift 2
  while [ $# -ge 2 ]; do
    v=$(value "$1" "$run/checkpoints/last.ckpt")
    awk -v v="$v" -v w="$2" -v t="$tol" 'BEGIN { d = v - w; exit !(v != "" && d * d <= t * t) }' || return 1
    shift 2
  done
}

W=$T/work
mkdir "$W"
cd "$W" || exit 1

# The kinds new offers: model and every kind of plugin, no more.
lk new --help >"$T/help" 2>&1
sed -n 's/^  X([A-Z_]*, \([a-z_]*\), .*/\1/p' "$LK_SRCDIR/src/plugin/kinds.h" >"$T/kinds"
{ echo model && cat "$T/kinds"; } | sort >"$T/want"
sed -n '/^KIND is one of:$/,/^$/s/^  \([a-z_]*\) .*/\1/p' "$T/help" | sort >"$T/got"
check "new --help lists model and every kind of src/plugin/kinds.h ($(wc -l <"$T/kinds") kinds)" \
  sh -c "test \$(wc -l <'$T/kinds') -ge 10 && cmp -s '$T/want' '$T/got'"
KIND_LIST=$(sed -n '/^KIND is one of:$/,/^$/s/^  \([a-z_]*\) .*/\1/p' "$T/help")

# Every kind: new, make, train, as NAME my_KIND (no bundled plugin's name).
for kind in $KIND_LIST; do
  name=my_$kind
  lk new "$name" --kind "$kind" >"$T/out" 2>&1
  check "$kind: loopkit new writes $name/ with its source, Makefile, config and README" \
    test $? -eq 0 -a -f "$name/$name.c" -a -f "$name/Makefile" \
    -a -f "$name/$name.ini" -a -f "$name/README.md"
  check "$kind: the README names the project and its kind" \
    grep -q "^\`loopkit new $name --kind $kind\`" "$name/README.md"
  check "$kind: the source has the shared preamble, its marks expanded" sh -c "
    grep -q '^/\* How a loopkit plugin works' '$name/$name.c' &&
    grep -q '\\[$name\\] section' '$name/$name.c' &&
    ! grep -q '@[A-Z]*@' '$name/$name.c' '$name/$name.ini' '$name/README.md' '$name/Makefile'"
  build "$name"
  check "$kind: make builds $name.so with pkg-config loopkit only, no warning" \
    test $? -eq 0 -a -f "$name/$name.so" -a ! -s "$T/build.log"
  check "$kind: $name.so exports exactly one symbol" \
    test "$(nm -D --defined-only "$name/$name.so" | awk '$2 ~ /[TDRB]/' | wc -l)" -eq 1
  lk_in "$name" train "$name.ini" --out run
  check "$kind: loopkit train $name.ini succeeds in $name/" test $? -eq 0
  cp "$T/out" "$T/$kind.out"
done

# What each plugin did, seen from outside.
R=$W/my_model/run
check "model: metrics.csv has the model's mae and val_mae" \
  sh -c "head -1 '$R/metrics.csv' | grep -q '^step,epoch,loss,mae,val_loss,val_mae$'"
check "model: its training loss falls from the first step to the last, a thousandfold" \
  awk -F, 'NR > 1 && $3 != "" { if (first == "") first = $3; last = $3 }
    END { exit !(first > 1 && last < first / 1000) }' "$R/metrics.csv"
check "model: sized from the data's 2 features, it finds y = -x + 0.5 x^2 + 2" \
  near "$R" 0.05 'weight[0]' -1 'weight[1]' 0.5 'bias[0]' 2
check "model: it logs the size it took from the data" \
  grep -q '^my_model: linear regression on 2 features$' "$T/model.out"
lk_in "$W/my_model" gradcheck my_model.ini --tolerance 1e-6
status=$?
check "model: loopkit gradcheck passes, weight and bias within 1e-6 of central differences" \
  sh -c "test $status -eq 0 && grep -Eq '^weight +[0-9.e-]+ +[0-9]+ *$' '$T/out' &&
    grep -Eq '^bias +[0-9.e-]+ +[0-9]+ *$' '$T/out'"
lk_in "$W/my_model" train my_model.ini --out run2 --set my_model.inputs=3
status=$?
check "model: inputs that the data's shape contradicts are refused before training" \
  sh -c "test $status -eq 2 && grep -q 'option inputs = 3, but the data.s samples have 2 features' '$T/out'"

R=$W/my_step/run
check "step: metrics.csv has the step's mae and val_mae" \
  sh -c "head -1 '$R/metrics.csv' | grep -q '^step,epoch,loss,mae,val_loss,val_mae$'"
check "step: with numeric as its backward, the fit finds y = 0.5 x^2 - x + 2" \
  near "$R" 0.05 'coef[0]' 0.5 'coef[1]' -1 'coef[2]' 2
check "step: the plugin is a step only" sh -c "
  (cd '$W/my_step' && LD_LIBRARY_PATH='$T/root$libdir' '$T/root$bindir/loopkit' inspect ./my_step.so) |
    grep -q '^kinds: *step$'"

R=$W/my_backward/run
check "backward: x moves from (-1.2, 1) to the minimum (1, 1)" \
  near "$R" 1e-3 'x[0]' 1 'x[1]' 1
grep -v '^backward = ' "$W/my_backward/my_backward.ini" >"$T/own.ini"
lk train "$T/own.ini" --out "$T/own" --quiet >/dev/null 2>&1
check "backward: the run ends within 1e-9 of rosenbrock's own backward's" \
  near "$R" 1e-9 'x[0]' "$(value 'x[0]' "$T/own/checkpoints/last.ckpt")" \
  'x[1]' "$(value 'x[1]' "$T/own/checkpoints/last.ckpt")"
lk_in "$W/my_backward" gradcheck my_backward.ini --tolerance 1e-6 --set rosenbrock.n=5
status=$?
check "backward: loopkit gradcheck passes, n = 5, within 1e-6" \
  sh -c "test $status -eq 0 && grep -Eq '^x +[0-9.e-]+ +5 *$' '$T/out'"
lk_in "$W/my_backward" gradcheck my_backward.ini --tolerance 1e-3 --set rosenbrock.dtype=f32
status=$?
check "backward: and in f32, within 1e-3" test $status -eq 0
lk_in "$W/my_backward" train my_backward.ini --out run2 --set plugins.step=linear --set linear.inputs=1
status=$?
check "backward: a step without its parameter x is refused, naming it" \
  sh -c "test $status -eq 2 && grep -q 'the step has no parameter x' '$T/out'"

R=$W/my_optimizer/run
check "optimizer: it logs its options" grep -q '^my_optimizer: lr 0.001, momentum 0.9, 1 parameter tensors$' "$T/optimizer.out"
check "optimizer: x moves from (-1.2, 1) to the minimum (1, 1)" \
  near "$R" 1e-3 'x[0]' 1 'x[1]' 1
lk_in "$W/my_optimizer" train my_optimizer.ini --out run2 --set my_optimizer.momentum=1
status=$?
check "optimizer: the host holds momentum to its declared range [0, 1)" \
  sh -c "test $status -eq 2 && grep -q 'option my_optimizer.momentum = 1: must be >= 0 and < 1' '$T/out'"
python3 "$LK_SRCDIR/tests/cli/ckpt_edit.py" "$R/checkpoints/last.ckpt" "$T/neg.ckpt" 'my_optimizer.lr[0]=-1'
lk_in "$W/my_optimizer" train my_optimizer.ini --out run3 --resume "$T/neg.ckpt" --set loop.max_steps=2100
status=$?
check "optimizer: check_state refuses a checkpoint's negative learning rate" \
  sh -c "test $status -eq 2 && grep -q 'state my_optimizer.lr\[0\] = -1' '$T/out'"

R=$W/my_zero_grad/run
check "zero_grad: it logs what it zeroes" \
  grep -q '^my_zero_grad: zeroing 2 gradient values in 1 tensors' "$T/zero_grad.out"
grep -Ev '^(zero_grad = |\[my_zero_grad\]|verbose = )' "$W/my_zero_grad/my_zero_grad.ini" >"$T/zero.ini"
lk train "$T/zero.ini" --out "$T/zero" --quiet >/dev/null 2>&1
"$LOOPKIT" dump "$T/zero/checkpoints/last.ckpt" >"$T/zero.dump" 2>&1
check "zero_grad: the run ends exactly where the bundled zero's does" \
  sh -c "'$LOOPKIT' dump '$R/checkpoints/last.ckpt' | cmp -s - '$T/zero.dump' &&
    grep -q '^x\[0\] 0\.99' '$T/zero.dump'"

R=$W/my_profiler/run
check "profiler: report in RUN_DIR/my_profiler.txt, training_step called 1000 times" \
  awk '$1 == "training_step" && $2 == 1000 { found = 1 } END { exit !found }' "$R/my_profiler.txt"
check "profiler: optimizer_step and closure timed too" \
  sh -c "grep -q '^optimizer_step  *1000 ' '$R/my_profiler.txt' && grep -q '^closure  *1000 ' '$R/my_profiler.txt'"

R=$W/my_data/run
check "data: validation and test splits ran" \
  sh -c "head -1 '$R/metrics.csv' | grep -q '^step,epoch,loss,val_loss,test_loss$'"
check "data: linear learns the weights (1, -2, 3) and bias 0.5" \
  near "$R" 0.02 'weight[0]' 1 'weight[1]' -2 'weight[2]' 3 'bias[0]' 0.5
lk_in "$W/my_data" train my_data.ini --out run2 --set linear.inputs=4
status=$?
check "data: its declared sample shape makes linear refuse inputs = 4 before training" \
  sh -c "test $status -eq 2 && grep -q 'inputs = 4, but the data.s samples have 3 features' '$T/out'"
lk_in "$W/my_data" train my_data.ini --out run3 --set my_data.n_train=0
status=$?
check "data: the host holds n_train to its declared range" \
  sh -c "test $status -eq 2 && grep -q 'option my_data.n_train = 0: must be >= 1' '$T/out'"

R=$W/my_callback/run
check "callback: grad_norm column in metrics.csv" \
  sh -c "head -1 '$R/metrics.csv' | grep -q '^step,epoch,loss,grad_norm,val_loss$'"
check "callback: grad_norm on every step row" \
  awk -F, 'NR > 1 && $3 != "" { n++; if ($4 == "" || $4 <= 0) bad = 1 } END { exit bad || n != 20 }' "$R/metrics.csv"
check "callback: epoch, validation and train hooks logged" sh -c "
  grep -q '^my_callback: train start: 2 parameter tensors, 2 values; epoch 0, step 0$' '$T/callback.out' &&
  grep -q '^my_callback: epoch 4: 4 batches, 4 backwards, 4 optimizer steps' '$T/callback.out' &&
  grep -q '^my_callback: train end: 5 epochs, 20 steps, 5 validations' '$T/callback.out'"
lk_in "$W/my_callback" train my_callback.ini --out run2 --set my_callback.stop_below=2
check "callback: stop_below stops training after an epoch's validation" \
  grep -q 'trained 16 steps (4 epochs)' "$T/out"

R=$W/my_scheduler/run
check "scheduler: lr decays by gamma = 0.995 every step down to min_lr" \
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "lr") c = i }
    NR == 2 && $c != 0.001 { bad = 1 }
    NR == 3 { r = $c / 0.001 - 0.995; if (r * r > 1e-20) bad = 1 }
    { last = $c }
    END { exit bad || !c || last != 0.0001 }' "$R/metrics.csv"

R=$W/my_strategy/run
check "strategy: setup logs rank 0 of 1 and what there is" \
  grep -q '^my_strategy: rank 0 of 1: 1 parameter tensors (2 values)' "$T/strategy.out"
lk_in "$W/my_strategy" train my_strategy.ini --out run2 --set rosenbrock.x0=1e200
status=$?
check "strategy: reduce_gradients runs: check_finite fails the run, naming the gradient" \
  sh -c "test $status -eq 1 && grep -Eq 'gradient of x\[[01]\] is -?(inf|nan) \(check_finite = true\)' '$T/out'"

R=$W/my_precision/run
check "precision: overflows at scale 65536 skip steps while the scale halves" \
  test "$(grep -c '^my_precision: gradients overflowed at scale [0-9]*: step skipped' "$T/precision.out")" -eq 8
check "precision: the scale grows after growth_interval good steps" \
  grep -q '^my_precision: 200 steps without overflow: scale 256 -> 512$' "$T/precision.out"
check "precision: x still reaches the minimum" near "$R" 0.02 'x[0]' 1 'x[1]' 1
lk_in "$W/my_precision" inspect ./my_precision.so
check "precision: loopkit inspect loads it as a precision plugin of ABI 1.7" \
  sh -c "grep -q '^kinds: *precision$' '$T/out' && grep -q '^abi: *1.7$' '$T/out'"

# same_rows RUN: RUN/my_logger.jsonl holds RUN/metrics.csv's rows, one
# line each, every set cell under its column name, to the bit.
same_rows() {
  python3 - "$1/metrics.csv" "$1/my_logger.jsonl" <<'PY'
import json, sys
rows = open(sys.argv[1]).read().splitlines()
head, rows = rows[0].split(","), [r.split(",") for r in rows[1:]]
lines = [json.loads(l) for l in open(sys.argv[2]).read().splitlines()]
want = [dict([("step", int(r[0])), ("epoch", int(r[1]))] +
             [(head[i], float(r[i])) for i in range(2, len(r)) if r[i]])
        for r in rows]
sys.exit(0 if lines == want and len(lines) > 10 else 1)
PY
}
R=$W/my_logger/run
check "logger: my_logger.jsonl has a line per metrics.csv row, the same step, epoch and cells" same_rows "$R"
rows=$(($(wc -l <"$R/metrics.csv") - 1))
check "logger: it logs where the rows go, and at the end how many went" sh -c "
  grep -q '^my_logger: rows go to run/my_logger.jsonl from step 0 (a new run)\$' '$T/logger.out' &&
  grep -q '^my_logger: $rows rows logged to run/my_logger.jsonl (success)\$' '$T/logger.out'"
lk_in "$W/my_logger" train my_logger.ini --out run2 --set loop.keep_last=10
lk_in "$W/my_logger" train my_logger.ini --resume run2/checkpoints/step-8.ckpt
check "logger: resumed from an older checkpoint, in a new run directory" \
  grep -q '^my_logger: rows go to runs/my_logger-1/my_logger.jsonl from step 8 (resumed in a new run directory)$' "$T/out"
check "... whose my_logger.jsonl begins with the source's rows: every row once" \
  same_rows "$W/my_logger/runs/my_logger-1"
lk_in "$W/my_logger" train my_logger.ini --resume runs/my_logger-1/checkpoints/last.ckpt --set loop.max_epochs=7
check "logger: resumed in place with more epochs, the file goes on: every row once" \
  sh -c "grep -q '(resumed in place)\$' '$T/out' && test \$(wc -l <'$W/my_logger/runs/my_logger-1/metrics.csv') -gt $((rows + 1))"
check "... and still matches metrics.csv" same_rows "$W/my_logger/runs/my_logger-1"

# Under umask 002 the project is still one loopkit agrees to load: new
# and the Makefile keep the directory and the plugin from group writes.
(umask 002 && lk new shared --kind optimizer >/dev/null 2>&1 && build shared &&
  lk_in shared train shared.ini --out run --quiet)
check "umask 002: directory and plugin are kept writable by their owner only" \
  test "$(stat -c %a shared)" = 755 -a "$(stat -c %a shared/shared.so)" = 755
check "umask 002: and loopkit trains with it" grep -q '^trained 2000 steps' "$T/out"

# ---- refusals: exit 2, a message, nothing written ------------------------
KINDS="kinds: $(echo $KIND_LIST | sed 's/ /, /g')"
ls -A >"$T/before"
exp2() { # exp2 PATTERN DESC ARGS...
  pattern=$1 desc=$2
  shift 2
  lk new "$@" >"$T/out" 2>&1
  got=$?
  if [ "$got" -ne 2 ]; then
    not_ok "$desc" "exit status $got, expected 2" "$(head -c 2000 "$T/out")"
  elif ! grep -Eq -- "$pattern" "$T/out"; then
    not_ok "$desc" "output does not match /$pattern/:" "$(head -c 2000 "$T/out")"
  else
    ok "$desc"
  fi
}
exp2 "--kind KIND is required; $KINDS" "no --kind: refused, the kinds listed" fresh
exp2 "unknown kind \"modle\"; $KINDS" "unknown kind: refused, the kinds listed" fresh --kind modle
exp2 "--kind needs a value; $KINDS" "--kind without its value" fresh --kind
exp2 'no NAME' "no NAME" --kind step
exp2 'more than one NAME' "two NAMEs" a b --kind step
exp2 'unknown option "--force"' "unknown option" fresh --kind step --force
exp2 '--kind given twice' "--kind twice" fresh --kind step --kind=data
for bad in 9lives my-plugin my.plugin ../up a/b 'sp ace' ''; do
  exp2 "invalid NAME \"$bad\": it must be a C identifier" "NAME \"$bad\" refused" "$bad" --kind step
done
long=$(printf 'x%.0s' $(seq 65))
exp2 'invalid NAME "x+": it must be a C identifier' "a NAME of 65 characters refused" "$long" --kind step
exp2 'NAME "rosenbrock" is taken: rosenbrock.ini also loads the bundled plugin rosenbrock' \
  "a NAME its config also loads (rosenbrock) refused" rosenbrock --kind optimizer
exp2 'NAME "sgd" is taken' "a NAME its config also loads (sgd) refused" sgd --kind data
exp2 'NAME "numeric" is taken: numeric.ini also loads the bundled plugin numeric' \
  "a NAME its config gives a role (numeric, the step's backward) refused" numeric --kind step
exp2 'NAME "zero" is taken' "zero, the zero_grad a config without one loads, refused" zero --kind model
ls -A >"$T/after"
check "the refusals wrote nothing" cmp -s "$T/before" "$T/after"

# NAME exists: as the directory of an earlier new (edited since), as a
# file, as a dangling symbolic link. Nothing is touched.
echo "/* my edits */" >>my_step/my_step.c
(cd my_step && ls -l --time-style=full-iso && cksum ./*) >"$T/before"
exp2 '^loopkit: new: my_step already exists; nothing was written' "an existing directory is refused" my_step --kind step
(cd my_step && ls -l --time-style=full-iso && cksum ./*) >"$T/after"
check "and nothing in it changed" cmp -s "$T/before" "$T/after"
echo keep >afile
exp2 'afile already exists' "an existing file is refused" afile --kind data
check "and it is untouched" test "$(cat afile)" = keep
ln -s nowhere alink
exp2 'alink already exists' "a dangling symbolic link is refused" alink --kind data
check "and it still points nowhere" test "$(readlink alink)" = nowhere -a ! -e nowhere

# A failure part-way (the file size limit stops the largest file, written
# last) takes back every file written and the directory.
(trap '' XFSZ && ulimit -f 8 && lk new partial --kind model) >"$T/out" 2>&1
status=$?
check "a write that fails part-way: exit 1, the file named" \
  sh -c "test $status -eq 1 && grep -q 'cannot write partial/partial.c: ' '$T/out'"
check "and nothing is left behind" test ! -e partial -a ! -L partial

lk new --help >"$T/out" 2>&1
status=$?
check "new --help: usage, every kind with a line" sh -c "test $status -eq 0 &&
  grep -q '^usage: loopkit new NAME --kind KIND' '$T/out' &&
  test \$(grep -Ec '^  [a-z_]+ +[a-zA-Z]' '$T/out') -eq $(wc -l <"$T/want")"
finish

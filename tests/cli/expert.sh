#!/bin/sh
# The expert examples, each built out of tree with nothing but pkg-config
# loopkit against an installed loopkit and run with it (as sdk.sh does for
# examples/plugin):
#  - examples/gan: manual optimization driving the run's two optimizers (sgd for the
#    discriminator, adamw for the generator, each over its network), gradients by hand;
#  - examples/bind_lbfgs: a C program minimising a plain C function turned
#    into a closure with lk_bind, with lbfgs and no model plugin
#    (lk_optimizer_open);
#  - examples/loss_scale: a precision plugin doing dynamic loss scaling;
#  - examples/closure: a closure made with lk_closure_new from three plain
#    C functions (step, zero_grad, backward), minimised by an optimizer
#    opened with lk_optimizer_open.
. "$LK_SRCDIR/tests/cli/lib.sh"
: "${LK_BUILDDIR:?}"

make -s -C "$LK_BUILDDIR" install DESTDIR="$T/root" >"$T/install.log" 2>&1
check "make install into a staging directory" test $? -eq 0
pc="$LK_BUILDDIR/loopkit.pc"
libdir=$(pkg-config --variable=libdir "$pc")
bindir=$(pkg-config --variable=exec_prefix "$pc")/bin
pluginsdir=$(pkg-config --variable=pluginsdir "$pc")
LK="$T/root$bindir/loopkit"

# build NAME FILE [MAKE-ARGS...]: copies examples/NAME to $T/NAME and makes
# it with the staged loopkit.pc; passes when FILE was built.
build() {
  cp -R "$LK_SRCDIR/examples/$1" "$T/$1"
  chmod -R u+w "$T/$1"
  rm -f "$T/$1/$2"
  ex=$1 file=$2
  shift 2
  PKG_CONFIG_PATH="$T/root$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$T/root" \
    make -s -C "$T/$ex" "$@" >"$T/$ex.build.log" 2>&1
  set -- "$ex" "$file"
  check "examples/$1 builds with pkg-config loopkit only" test -f "$T/$1/$2"
}

# lk DIR ARGS...: the installed loopkit, plugins from DIR and the installed
# plugin directory only, output in $T/out.
lk() {
  dir=$1
  shift
  LD_LIBRARY_PATH="$T/root$libdir" LOOPKIT_PLUGIN_PATH="$dir:$T/root$pluginsdir" \
    "$LK" "$@" >"$T/out" 2>&1
}

# dump CKPT OUT: the installed loopkit dump.
dump() { LD_LIBRARY_PATH="$T/root$libdir" "$LK" dump "$1" >"$2" 2>&1; }

# last CSV COLUMN: COLUMN (by its header) of the last row of CSV.
last() {
  awk -F, -v c="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i }
    END { print $k }' "$1"
}

# near A B TOL: |A - B| <= TOL.
near() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; exit !(a != "" && d * d <= t * t) }'; }

# ---- gan ----------------------------------------------------------------
build gan gan.so
cd "$T/gan" || exit 1
lk "$T/gan" train gan.ini --out "$T/gan-run" --quiet
check "gan: trains with manual optimization" test $? -eq 0
csv="$T/gan-run/metrics.csv"
check "gan: logs d_loss and g_loss" \
  sh -c "head -1 '$csv' | grep -q '^step,epoch,loss,d_loss,g_loss,'"
check "gan: the generator starts far from the target" \
  sh -c "awk -F, 'NR == 2 { exit !(\$6 < 0.1 && \$9 < 1.1) }' '$csv'"
for c in "g_mean_x 2" "g_mean_y -1" "g_std_x 0.5" "g_std_y 1.5"; do
  set -- $c
  v=$(last "$csv" "$1")
  check "gan: the generator learnt the target's $1 ($v, target $2)" near "$v" "$2" 0.1
done
dump "$T/gan-run/checkpoints/last.ckpt" "$T/gan.dump"
for c in "0 2" "1 -1"; do
  set -- $c
  v=$(awk -v k="generator.bias[$1]" '$1 == k { print $2 }' "$T/gan.dump")
  check "gan: the checkpoint's generator.bias[$1] is the target mean ($v)" near "$v" "$2" 0.1
done
check "gan: the discriminator was trained too" \
  sh -c "awk '\$1 ~ /^discriminator.weight/ && \$2 != 0 { n++ } END { exit n != 5 }' '$T/gan.dump'"
# Both optimizers' steps count, as Lightning's global_step does: 10 steps
# are 5 rounds (once only the run's optimizer counted: 10 rounds).
lk "$T/gan" train gan.ini --out "$T/gan-10" --quiet --set loop.max_steps=10
check "gan: each round is two steps of the run (5 rows, at steps 0, 2, ..., 8)" \
  sh -c "grep -q 'trained 10 steps' '$T/out' && awk -F, 'NR > 1 { n++; s = \$1 } END { exit !(n == 5 && s == 8) }' '$T/gan-10/metrics.csv'"
# A resume, on a run of 600 steps (the whole 6000 again took minutes under
# the sanitizers): 300, then resumed to 600, ends where 600 in one go do.
lk "$T/gan" train gan.ini --out "$T/gan-600" --quiet --set loop.max_steps=600 &&
  lk "$T/gan" train gan.ini --out "$T/gan-half" --quiet --set loop.max_steps=300 &&
  lk "$T/gan" train gan.ini --out "$T/gan-resumed" --quiet --set loop.max_steps=600 \
    --resume "$T/gan-half/checkpoints/last.ckpt"
check "gan: a resumed run trains" test $? -eq 0
dump "$T/gan-600/checkpoints/last.ckpt" "$T/gan-600.dump"
dump "$T/gan-resumed/checkpoints/last.ckpt" "$T/gan-resumed.dump"
check "gan: it ends exactly where the whole run did (both optimizers' state)" \
  sh -c "cmp -s '$T/gan-600.dump' '$T/gan-resumed.dump' && test \$(wc -l <'$T/gan-600.dump') -eq 12"
# Each optimizer steps its own network only: with weight decay on both
# (which moved the other network when both stepped every parameter), and
# with one plugin for both (two instances, each its own state).
check "gan: both optimizers have weight decay" \
  sh -c "grep -qx 'weight_decay = 0.0001' gan.ini && grep -qx 'weight_decay = 0.01' gan.ini"
lk "$T/gan" train gan.ini --out "$T/gan-same" --quiet --set 'plugins.optimizer=disc:adamw, gen:adamw' \
  --set disc.momentum= --set loop.max_steps=20
check "gan: one plugin for both optimizers, two instances, trains" test $? -eq 0
check "... each with its own state in the checkpoint" \
  sh -c "python3 '$LK_SRCDIR/tests/cli/ckpt_edit.py' '$T/gan-same/checkpoints/last.ckpt' --dump |
    grep -q '^disc.exp_avg.discriminator.weight' &&
    python3 '$LK_SRCDIR/tests/cli/ckpt_edit.py' '$T/gan-same/checkpoints/last.ckpt' --dump |
    grep -q '^gen.exp_avg.generator.weight'"
lk "$T/gan" train gan.ini --out "$T/gan-noopt" --quiet --set gan.g_optimizer=nope
check "gan: g_optimizer naming no optimizer of the run is refused" \
  sh -c "test $? -eq 2 && grep -q 'option g_optimizer = nope: the run has no optimizer of that name' '$T/out'"
# Its options' ranges, enforced by the host before create; how many values
# a pair takes is the plugin's check.
lk "$T/gan" train gan.ini --out "$T/gan-bad1" --quiet --set gan.batch_size=0
check "gan: batch_size 0 is refused by its range" \
  sh -c "test $? -eq 2 && grep -q 'option gan.batch_size = 0: must be >= 1 and <= 1048576' '$T/out'"
lk "$T/gan" train gan.ini --out "$T/gan-bad2" --quiet --set gan.target_std=1,0
check "gan: a target_std of 0 is refused by its range, naming the value" \
  sh -c "test $? -eq 2 && grep -q 'option gan.target_std = 1,0: value 2 must be > 0' '$T/out'"
lk "$T/gan" train gan.ini --out "$T/gan-bad3" --quiet --set gan.r1=-1
check "gan: a negative r1 is refused by its range" \
  sh -c "test $? -eq 2 && grep -q 'option gan.r1 = -1: must be >= 0' '$T/out'"
lk "$T/gan" train gan.ini --out "$T/gan-bad4" --quiet --set gan.target_mean=1,nan
check "gan: a target_mean that is not finite is refused" \
  sh -c "test $? -eq 2 && grep -q 'option gan.target_mean = 1,nan: value 2 must be a finite number' '$T/out'"
lk "$T/gan" train gan.ini --out "$T/gan-bad5" --quiet --set gan.target_mean=1
check "gan: a target_mean of one value is refused by the plugin" \
  sh -c "test $? -eq 2 && grep -q 'option target_mean: give two values, x,y (1 given)' '$T/out'"

# ---- bind_lbfgs ---------------------------------------------------------
# A program linked with a sanitizer build of libloopkit must have the
# sanitizer runtime first: build it with the same flags.
build bind_lbfgs bind_lbfgs CC="${LK_CC:-cc} ${LK_SANITIZE:-}"
cd "$T/bind_lbfgs" || exit 1
# A plain program: the library from LD_LIBRARY_PATH, lbfgs.so from the
# installed plugin directory.
bl() {
  LD_LIBRARY_PATH="$T/root$libdir" LOOPKIT_PLUGIN_PATH="$T/root$pluginsdir" \
    ./bind_lbfgs "$@" >"$T/out" 2>&1
}
bl bind_lbfgs.ini
check "bind_lbfgs: runs" test $? -eq 0
cp "$T/out" "$T/bl.out"
check "bind_lbfgs: x = (1, ..., 1) to 1e-8 in 10 variables" \
  sh -c "awk '/^x\\[/ { n++; d = \$2 - 1; if (d * d > 1e-16) bad = 1 } END { exit bad || n != 10 }' '$T/bl.out'"
check "bind_lbfgs: the minimum is 0 and the evaluations are counted" \
  sh -c "awk '/^minimum/ { ok = \$2 < 1e-16 && \$7 > 10 } END { exit !ok }' '$T/bl.out'"
check "bind_lbfgs: links libloopkit" \
  sh -c "LD_LIBRARY_PATH='$T/root$libdir' ldd ./bind_lbfgs | grep -q '$T/root$libdir/libloopkit'"
sed 's/^history_size = .*/history_size = 0/' bind_lbfgs.ini >"$T/bad.ini"
bl "$T/bad.ini"
check "bind_lbfgs: lbfgs's refusal of an option reaches the program" \
  sh -c "test $? -eq 1 && grep -q 'history_size = 0' '$T/out'"

# ---- closure --------------------------------------------------------------
build closure closure CC="${LK_CC:-cc} ${LK_SANITIZE:-}"
cd "$T/closure" || exit 1
cl() {
  LD_LIBRARY_PATH="$T/root$libdir" LOOPKIT_PLUGIN_PATH="$T/root$pluginsdir" \
    ./closure "$@" >"$T/out" 2>&1
}
cl closure.ini
check "closure: step, zero_grad and backward composed, minimised by adam" \
  sh -c "test $? -eq 0 && awk '/^a / { a = \$2 } /^b / { b = \$2 } END { exit !((a - 2)^2 < 1e-4 && (b + 1)^2 < 1e-4) }' '$T/out'"
printf '[optimizer]\nname = lbfgs\nsteps = 5\n[lbfgs]\nline_search_fn = strong_wolfe\n' >"$T/cl-lbfgs.ini"
cl "$T/cl-lbfgs.ini"
check "closure: the same closure minimised by lbfgs, which calls it many times" \
  sh -c "test $? -eq 0 && awk '/^loss / { exit !(\$2 < 1e-3) }' '$T/out'"
printf '[optimizer]\nname = adam\n[adam]\nlr = -1\n' >"$T/cl-bad.ini"
cl "$T/cl-bad.ini"
check "closure: the optimizer's refusal of an option reaches the program" \
  sh -c "test $? -eq 1 && grep -q 'lr = -1' '$T/out'"

# ---- loss_scale ---------------------------------------------------------
build loss_scale loss_scale.so
cd "$T/loss_scale" || exit 1
lk "$T/loss_scale" inspect ./loss_scale.so
check "loss_scale: a precision plugin (and a callback)" \
  grep -q '^kinds: *callback,precision$' "$T/out"
lk "$T/loss_scale" train loss_scale.ini --out "$T/ls" --set loop.max_steps=300
check "loss_scale: trains" test $? -eq 0
cp "$T/out" "$T/ls.out"
csv="$T/ls/metrics.csv"
check "loss_scale: logs loss_scale and overflow" \
  sh -c "head -1 '$csv' | grep -qx 'step,epoch,loss,loss_scale,overflow'"
# The gradient at (-1.2, 1) is about 216: scaled by 65536 ... 512 it
# exceeds 65504, by 256 it does not.
check "loss_scale: 8 steps overflow, halving the scale from 65536 to 512" \
  sh -c "awk -F, 'NR >= 2 && NR <= 9 { if (\$4 != 65536 / 2 ^ (NR - 2) || \$5 != 1) bad = 1 }
    END { exit bad }' '$csv'"
check "loss_scale: the parameters do not move while steps are skipped" \
  sh -c "awk -F, 'NR == 2 { l = \$3 } NR >= 2 && NR <= 10 && \$3 != l { bad = 1 } END { exit bad }' '$csv'"
lk "$T/loss_scale" train loss_scale.ini --out "$T/ls8" --quiet --set loop.max_steps=8
dump "$T/ls8/checkpoints/last.ckpt" "$T/ls8.dump"
check "loss_scale: after 8 skipped steps x is still (-1.2, 1)" \
  sh -c "awk '\$1 == \"x[0]\" && \$2 == -1.2 { a = 1 } \$1 == \"x[1]\" && \$2 == 1 { b = 1 }
    END { exit !(a && b && NR == 2) }' '$T/ls8.dump'"
check "loss_scale: at scale 256 the step is taken" \
  sh -c "awk -F, 'NR == 10 { exit !(\$4 == 256 && \$5 == 0) }' '$csv'"
check "loss_scale: then the loss falls" \
  sh -c "awk -F, 'NR == 2 { a = \$3 } END { exit !(\$3 < a / 1000) }' '$csv'"
check "loss_scale: each change is logged" \
  grep -q 'loss scale 65536 -> 32768 (gradients overflowed, step skipped)' "$T/ls.out"
check "loss_scale: after growth_interval = 100 good steps the scale doubles" \
  sh -c "awk -F, 'NR == 109 && \$4 != 256 { bad = 1 } NR == 110 && \$4 != 512 { bad = 1 }
    END { exit bad }' '$csv'"
lk "$T/loss_scale" train loss_scale.ini --out "$T/ls-torch" --quiet \
  --set loop.max_steps=300 --set loss_scale.growth_interval=2000
check "loss_scale: with torch's growth_interval (2000) it does not grow in 300 steps" \
  sh -c "awk -F, 'NR > 9 && \$4 != 256 { bad = 1 } END { exit bad }' '$T/ls-torch/metrics.csv'"
lk "$T/loss_scale" train loss_scale.ini --out "$T/ls-fp" --quiet --set loop.max_steps=300 \
  --set loss_scale.max_value=1000 --set loss_scale.growth_interval=10 --set rosenbrock.dtype=f32
check "loss_scale: a small range and growth_interval: the scale grows and backs off again" \
  sh -c "awk -F, 'NR > 11 && \$5 == 1 { off++ } NR > 11 && \$4 > s && s { up++ } { s = \$4 }
    END { exit !(off > 5 && up > 5) }' '$T/ls-fp/metrics.csv'"
lk "$T/loss_scale" train loss_scale.ini --out "$T/ls-half" --quiet --set loop.max_steps=150 &&
  lk "$T/loss_scale" train loss_scale.ini --out "$T/ls-resumed" --quiet \
    --set loop.max_steps=300 --resume "$T/ls-half/checkpoints/last.ckpt"
check "loss_scale: a resumed run trains" test $? -eq 0
check "loss_scale: it continues the scale and the growth count exactly" \
  sh -c "awk -F, 'NR > 151' '$csv' >'$T/ls.tail' && awk -F, 'NR > 1 && \$1 >= 150' '$T/ls-resumed/metrics.csv' |
    cmp -s - '$T/ls.tail' && test \$(wc -l <'$T/ls.tail') -eq 150"
# Its options' ranges, enforced by the host before create; max_value's
# closes on inf, which it therefore takes.
lk "$T/loss_scale" inspect ./loss_scale.so
check "loss_scale: inspect shows the ranges" \
  sh -c "grep -Eq '^  backoff_factor +double \(0, 1\) +default 0.5' '$T/out' && grep -Eq '^  max_value +double \(0, inf\] +default 65504' '$T/out'"
lk "$T/loss_scale" train loss_scale.ini --out "$T/ls-inf" --quiet --set loop.max_steps=20 \
  --set loss_scale.max_value=inf
check "loss_scale: max_value = inf is taken (only non-finite gradients overflow)" test $? -eq 0
for bad in "backoff_factor=1:must be > 0 and < 1" "growth_factor=1:must be > 1" \
  "init_scale=inf:must be a finite number" "growth_interval=0:must be >= 1" \
  "max_value=0:must be > 0"; do
  setting=${bad%%:*} want=${bad#*:}
  lk "$T/loss_scale" train loss_scale.ini --out "$T/ls-bad" --quiet --set "loss_scale.$setting"
  check "loss_scale: $setting is refused by its range" \
    sh -c "test $? -eq 2 && grep -q 'option loss_scale.${setting%%=*} = ${setting#*=}: $want' '$T/out'"
done
finish

#!/bin/sh
# Existing C optimizers as plugins: liblbfgs (plugins/optimizer/liblbfgs.c) and GSL's
# multimin BFGS2 (plugins/optimizer/gsl_bfgs.c), each given loopkit's closure as its
# function. On Rosenbrock (n = 2 and 10, f64, one optimizer step) each
# reaches the minimum loopkit's own lbfgs reaches, to 1e-8 per coordinate.
# A NaN from the closure in the middle of a step ends the step at once and
# leaves the parameters where it started; max_iterations ends a step with a
# warning; a value outside an option's range is refused, naming the option
# and the range. A plugin that was not built (configure did not find its
# library) is skipped, saying why.
. "$LK_SRCDIR/tests/cli/lib.sh"
cd "$T" || exit 1

# skip DESC REASON: a check that cannot run here.
skip() {
  n=$((n + 1))
  echo "ok $n - $1 # SKIP $2"
}

# rosen NAME OPTIMIZER N [KEY = VALUE]...: NAME.ini, one optimizer step of
# OPTIMIZER on Rosenbrock in N dimensions from (-1.2, 1, -1.2, ...).
rosen() {
  name=$1 opt=$2 dim=$3
  shift 3
  {
    printf '[loop]\nmax_steps = 1\n[plugins]\nstep = rosenbrock\n'
    printf 'optimizer = %s\n[rosenbrock]\nn = %s\n[%s]\n' "$opt" "$dim" "$opt"
    for kv in "$@"; do echo "$kv"; done
  } >"$T/$name.ini"
}

# maxdev RUN_A RUN_B N: the largest |difference| between the coordinates
# x[i] of the two runs' last checkpoints, or "none" unless both have N.
maxdev() {
  "$LOOPKIT" dump "$T/$1/checkpoints/last.ckpt" >"$T/$1.dump"
  "$LOOPKIT" dump "$T/$2/checkpoints/last.ckpt" >"$T/$2.dump"
  awk -v n="$3" '
    $1 !~ /^x\[/ { next }
    NR == FNR { ref[$1] = $2; a++; next }
    $1 in ref { d = $2 - ref[$1]; if (d < 0) d = -d; if (d > m) m = d; b++ }
    END { if (a == n && b == n) printf "%.3g\n", m + 0; else print "none" }
  ' "$T/$1.dump" "$T/$2.dump"
}

# within DEV: DEV is a deviation of at most 1e-8.
within() {
  case $1 in none | "") return 1 ;; esac
  awk -v d="$1" 'BEGIN { exit !(d <= 1e-8) }'
}

# final_loss RUN: RUN's last logged loss is Rosenbrock's (n = 2) at the
# parameters of its last checkpoint, computed as the plugin does.
final_loss() {
  a=$(value 'x[0]' "$1/checkpoints/last.ckpt")
  b=$(value 'x[1]' "$1/checkpoints/last.ckpt")
  loss=$(tail -n 1 "$1/metrics.csv" | cut -d, -f3)
  awk -v a="$a" -v b="$b" -v l="$loss" 'BEGIN {
    d = b - a * a; e = 1 - a; f = 100 * (d * d) + e * e
    r = f - l; if (r < 0) r = -r
    exit !(a != "" && l != "" && r <= 1e-12 * f) }'
}

# The reference: loopkit's lbfgs with torch's strong-Wolfe search, run to
# the bottom (its default tolerances stop it around 1e-7).
for dim in 2 10; do
  rosen "ref$dim" lbfgs "$dim" "line_search_fn = strong_wolfe" \
    "max_iter = 10000" "max_eval = 100000" "tolerance_grad = 1e-13" \
    "tolerance_change = 0"
  "$LOOPKIT" train "$T/ref$dim.ini" --out "$T/ref$dim" --quiet >"$T/ref$dim.out" 2>&1
  dev=$("$LOOPKIT" dump "$T/ref$dim/checkpoints/last.ckpt" | awk -v n="$dim" '
    $1 ~ /^x\[/ { d = $2 - 1; if (d < 0) d = -d; if (d > m) m = d; k++ }
    END { if (k == n) printf "%.3g\n", m + 0; else print "none" }')
  check "lbfgs, n = $dim: the reference is the minimum (1, ..., 1) to 1e-8 (max deviation $dev)" \
    within "$dev"
done

# A model that gives NaN on its third evaluation, inside the first step.
config nan <<INI
[loop]
max_steps = 1
[plugins]
step = probe
optimizer = sgd
[probe]
nan_loss_at = 2
trace = $T/nan.trace
[sgd]
lr = 0.001
INI

# interop PLUGIN BUILT REASON BAD_MESSAGE BAD_SETTING LAST [KEY = VALUE]...:
# the checks of one plugin, run with the settings KEY = VALUE; BAD_SETTING
# is refused (by the option's range) with BAD_MESSAGE; LAST: extra
# arguments for the final-loss run.
interop() {
  plugin=$1 built=$2 reason=$3 bad=$4 bad_setting=$5 last=$6
  shift 6
  if [ "$built" != yes ]; then
    for dim in 2 10; do
      skip "$plugin, n = $dim: the minimum lbfgs reaches, to 1e-8" "$reason"
    done
    skip "$plugin: the loop's loss is the loss at the final parameters" "$reason"
    skip "$plugin: a NaN at the closure's 3rd call ends the step there and leaves the parameters alone" "$reason"
    skip "$plugin: max_iterations ends a step with a warning" "$reason"
    skip "$plugin: a value outside an option's range is refused, naming the option and the range" "$reason"
    return
  fi
  for dim in 2 10; do
    rosen "$plugin$dim" "$plugin" "$dim" "$@"
    "$LOOPKIT" train "$T/$plugin$dim.ini" --out "$T/$plugin$dim" >"$T/$plugin$dim.out" 2>&1
    dev=$(maxdev "ref$dim" "$plugin$dim" "$dim")
    if within "$dev"; then
      ok "$plugin, n = $dim: the minimum lbfgs reaches, to 1e-8 (max deviation $dev)"
    else
      not_ok "$plugin, n = $dim: the minimum lbfgs reaches, to 1e-8" \
        "max deviation $dev" "$(head -c 2000 "$T/$plugin$dim.out")"
    fi
  done

  # The loop takes the closure's last result: after the library ends away
  # from its last evaluation, the loss logged must be the final point's.
  # (n = 2; liblbfgs reverts a failed line search, GSL ends its last one
  # with GSL_ENOPROG.)
  # shellcheck disable=SC2086 # LAST is a list of arguments
  "$LOOPKIT" train "$T/${plugin}2.ini" --out "$T/$plugin-last" --quiet $last >/dev/null 2>&1
  check "$plugin: the loop's loss is the loss at the final parameters" \
    final_loss "$T/$plugin-last"

  rm -f "$T/nan.trace"
  "$LOOPKIT" train "$T/nan.ini" --out "$T/nan-$plugin" --quiet \
    --set plugins.optimizer="$plugin" >/dev/null 2>&1
  w=$(value 'w[0]' "$T/nan-$plugin/checkpoints/last.ckpt"):$(value 'w[1]' "$T/nan-$plugin/checkpoints/last.ckpt")
  calls=$(grep -c '^training_step' "$T/nan.trace")
  check "$plugin: a NaN at the closure's 3rd call ends the step there and leaves the parameters alone" \
    test "w=$w calls=$calls" = "w=1:1 calls=3"

  expect 0 "warning: $plugin: step: 3 iterations, .*max_iterations reached" \
    "$plugin: max_iterations ends a step with a warning" \
    -- train "$T/${plugin}2.ini" --out "$T/$plugin-max" --set "$plugin.max_iterations=3"
  expect 2 "$bad" "$plugin: a value outside an option's range is refused, naming the option and the range" \
    -- train "$T/${plugin}2.ini" --out "$T/$plugin-bad" --set "$plugin.$bad_setting"
}

# liblbfgs: epsilon is on |g| / max(1, |x|).
interop liblbfgs "${LK_HAVE_LIBLBFGS:-no}" \
  "built without liblbfgs (Debian: liblbfgs-dev)" \
  'option liblbfgs\.m = 0: must be >= 1 and <= 2147483647' "m=0" \
  "--set liblbfgs.max_linesearch=1" \
  "epsilon = 1e-12" "max_iterations = 0"
# Its failed line search went back to where the step started.
if [ "${LK_HAVE_LIBLBFGS:-no}" = yes ]; then
  last="$T/liblbfgs-last/checkpoints/last.ckpt"
  check "liblbfgs: after a failed line search the parameters are liblbfgs's x" \
    test "$(value 'x[0]' "$last"):$(value 'x[1]' "$last")" = "-1.2:1"
else
  skip "liblbfgs: after a failed line search the parameters are liblbfgs's x" \
    "built without liblbfgs (Debian: liblbfgs-dev)"
fi

# GSL: its line search stops (GSL_ENOPROG) once the decrease it predicts is
# below DBL_EPSILON in absolute terms, which on Rosenbrock leaves x some
# 1e-9 to 1e-6 from the minimum depending on step_size and tol (3e-7 at
# n = 10 with its manual's 0.01 and 0.1); with these, 2.3e-9.
interop gsl_bfgs "${LK_HAVE_GSL:-no}" \
  "built without GSL (Debian: libgsl-dev)" \
  'option gsl_bfgs\.tol = 1\.5: must be > 0 and < 1' "tol=1.5" "" \
  "epsabs = 1e-12" "max_iterations = 0" "step_size = 0.1" "tol = 0.5"

finish

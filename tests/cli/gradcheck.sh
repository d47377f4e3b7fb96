#!/bin/sh
# loopkit gradcheck: analytic backwards against central differences.
. "$LK_SRCDIR/tests/cli/lib.sh"
EX="$LK_SRCDIR/examples/rosenbrock.ini"
cd "$T" || exit 1 # gradcheck must leave no runs/ here

expect 0 '^x +[0-9.e-]+ +2 *$' "rosenbrock f64: one row for x, 2 elements checked" \
  -- gradcheck "$EX" --tolerance 1e-8
expect 0 '^x +' "rosenbrock f32, n = 5, within 1e-3" \
  -- gradcheck "$EX" --set rosenbrock.dtype=f32 --set rosenbrock.n=5 --tolerance 1e-3
config lin <<INI
[plugins]
step = linreg
optimizer = sgd
data = synthetic
INI
expect 0 '^bias ' "a data model: every parameter reported" -- gradcheck "$T/lin.ini" --batches 3 --tolerance 1e-6
check "a data model: weight reported" grep -q '^weight ' "$T/out"
config wrong <<INI
[loop]
max_steps = 1
[plugins]
step = probe
optimizer = sgd
[probe]
grad = 3
INI
expect 1 'w +[0-9.e-]+ +2 +over tolerance' "a wrong backward is caught" -- gradcheck "$T/wrong.ini" --tolerance 1e-3
expect 2 'gradcheck: --samples "x": expected a number' "bad --samples" -- gradcheck "$EX" --samples x
expect 2 'gradcheck: no config file' "gradcheck without a config" -- gradcheck
check "gradcheck writes no run directory" test ! -d "$T/runs"
finish

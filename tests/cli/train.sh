#!/bin/sh
# loopkit train end to end: the Rosenbrock example converges and fills its
# run directory; runs/<name>-<N> never reuses a directory; --set, --quiet,
# the simple profiler, a data plugin with validation and test splits, resume.
. "$LK_SRCDIR/tests/cli/lib.sh"
EX="$LK_SRCDIR/examples/rosenbrock.ini"

expect 0 'trained 5000 steps' "the Rosenbrock example trains" -- train "$EX" --out "$T/ex"
check "config.ini written" test -s "$T/ex/config.ini"
check "config.ini has defaults filled in" grep -q '^dampening = 0$' "$T/ex/config.ini"
check "config.ini names the default zero_grad" grep -q '^zero_grad = zero$' "$T/ex/config.ini"
check "metrics.csv header starts step,epoch,loss" sh -c "head -1 '$T/ex/metrics.csv' | grep -q '^step,epoch,loss'"
check "metrics.csv has a row per step" test "$(wc -l <"$T/ex/metrics.csv")" -eq 5001
check "checkpoints/last.ckpt written" test -s "$T/ex/checkpoints/last.ckpt"
x0=$(value 'x[0]' "$T/ex/checkpoints/last.ckpt")
x1=$(value 'x[1]' "$T/ex/checkpoints/last.ckpt")
check "SGD converges to the minimum (1, 1)" awk -v a="$x0" -v b="$x1" \
  'BEGIN { exit !((a - 1) ^ 2 < 1e-4 && (b - 1) ^ 2 < 1e-4) }'
last=$(tail -1 "$T/ex/metrics.csv" | cut -d, -f3)
first=$(sed -n 2p "$T/ex/metrics.csv" | cut -d, -f3)
check "the loss falls from 24.2 to below 1e-4" awk -v f="$first" -v l="$last" \
  'BEGIN { exit !(f > 24 && l < 1e-4) }'

# Default run directories: runs/<config name>-<N>, a new one each time.
mkdir "$T/cwd" && cd "$T/cwd" || exit 1
"$LOOPKIT" train "$EX" --quiet --set loop.max_steps=5 >/dev/null 2>&1
"$LOOPKIT" train "$EX" --quiet --set loop.max_steps=5 >/dev/null 2>&1
check "first run in runs/rosenbrock-1" test -s runs/rosenbrock-1/checkpoints/last.ckpt
check "second run in runs/rosenbrock-2" test -s runs/rosenbrock-2/checkpoints/last.ckpt
cd "$T" || exit 1

expect 0 '^trained 7 steps' "--quiet prints only the summary" -- train "$EX" --quiet --out "$T/q" --set loop.max_steps=7
check "--quiet: a single line" test "$(wc -l <"$T/out")" -eq 1
check "--set overrides land in config.ini" grep -q '^max_steps = 7$' "$T/q/config.ini"

expect 0 'Total' "simple profiler prints its report" -- train "$EX" --out "$T/prof" \
  --set loop.max_steps=50 --set plugins.profiler=simple
check "profile.txt written with the columns" \
  grep -q 'Action.*Mean duration (s).*Num calls.*Total time (s).*Percentage %' "$T/prof/profile.txt"
check "profile.txt counts 50 closure calls" grep -Eq '^\|  closure[[:space:]]*\|[^|]*\|  50[[:space:]]' "$T/prof/profile.txt"

# Data: three splits, validation each epoch, test at the end.
config data <<INI
[loop]
max_epochs = 20
seed = 7
[plugins]
step = linreg
optimizer = sgd
data = synthetic
[synthetic]
shuffle = true
[sgd]
lr = 0.05
momentum = 0.9
INI
expect 0 'test: test_loss' "a data run prints its test result" -- train "$T/data.ini" --out "$T/data"
expect 0 'trained [0-9]+ steps \(1 epoch\) in' "one epoch is said in the singular" -- \
  train "$T/data.ini" --out "$T/data1" --set loop.max_epochs=1
check "metrics.csv has val_loss and test_loss columns" \
  sh -c "head -1 '$T/data/metrics.csv' | grep -q '^step,epoch,loss,mae,val_loss,val_mae,test_loss,test_mae'"
check "20 validation rows" test "$(awk -F, 'NR > 1 && $5 != ""' "$T/data/metrics.csv" | wc -l)" -eq 20
"$LOOPKIT" train "$T/data.ini" --out "$T/data5" --quiet --set loop.val_every_n_epochs=5 >/dev/null 2>&1
check "val_every_n_epochs = 5: 4 validation rows in 20 epochs" \
  test "$(awk -F, 'NR > 1 && $5 != ""' "$T/data5/metrics.csv" | wc -l)" -eq 4
check "checkpoints/ holds last.ckpt and no temporary file" \
  test "$(ls "$T/data5/checkpoints")" = last.ckpt
tl=$(awk -F, 'NR > 1 && $7 != "" { print $7 }' "$T/data/metrics.csv")
check "the linear model fits (test_loss < 0.01)" awk -v t="$tl" 'BEGIN { exit !(t < 0.01) }'
"$LOOPKIT" train "$T/data.ini" --out "$T/data2" --quiet >/dev/null 2>&1
check "same seed, same run: bitwise equal parameters" \
  sh -c "'$LOOPKIT' dump '$T/data/checkpoints/last.ckpt' >'$T/a'; '$LOOPKIT' dump '$T/data2/checkpoints/last.ckpt' >'$T/b'; cmp -s '$T/a' '$T/b'"
"$LOOPKIT" train "$T/data.ini" --out "$T/data3" --quiet --set loop.seed=8 >/dev/null 2>&1
check "another seed, another run" \
  sh -c "'$LOOPKIT' dump '$T/data3/checkpoints/last.ckpt' >'$T/c'; ! cmp -s '$T/a' '$T/c'"

# Resume: 40 steps, then on to 100, equals 100 straight (SGD with momentum).
"$LOOPKIT" train "$EX" --out "$T/full" --quiet --set loop.max_steps=100 >/dev/null 2>&1
"$LOOPKIT" train "$EX" --out "$T/part" --quiet --set loop.max_steps=40 >/dev/null 2>&1
expect 0 "trained 100 steps.*run directory $T/part\$" "--resume continues a run, in its directory" \
  -- train "$EX" --resume "$T/part/checkpoints/last.ckpt" --set loop.max_steps=100
check "resumed run equals the uninterrupted one, bit for bit" \
  sh -c "'$LOOPKIT' dump '$T/full/checkpoints/last.ckpt' >'$T/a'; '$LOOPKIT' dump '$T/part/checkpoints/last.ckpt' >'$T/b'; cmp -s '$T/a' '$T/b'"
check "resumed run appended to metrics.csv" test "$(wc -l <"$T/part/metrics.csv")" -eq 101
expect 2 'this config does not build|is f64\[2\] there but f64\[3\]' "resume refuses other shapes" \
  -- train "$EX" --resume "$T/part/checkpoints/last.ckpt" --out "$T/other" --set rosenbrock.n=3
# strategy = single, the default strategy: the same run as none.
expect 0 'trained 100 steps' "strategy = single trains" \
  -- train "$EX" --set plugins.strategy=single --set loop.max_steps=100 --out "$T/single"
check "strategy = single: the same weights as without a strategy" \
  sh -c "'$LOOPKIT' dump '$T/full/checkpoints/last.ckpt' >'$T/a'; '$LOOPKIT' dump '$T/single/checkpoints/last.ckpt' >'$T/b'; cmp -s '$T/a' '$T/b'"

finish

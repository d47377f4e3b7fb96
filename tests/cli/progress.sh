#!/bin/sh
# Progress: a bar redrawn in place on a terminal (run under a pseudo-
# terminal with script(1)), plain log lines every log_every_n_steps when
# stderr is not a terminal, and --quiet. Epochs count from 0 everywhere:
# the bar (epoch 0/1 then 1/1, the last epoch after the slash), the log
# lines, the test line and metrics.csv.
. "$LK_SRCDIR/tests/cli/lib.sh"

command -v script >/dev/null || {
  not_ok "script(1) (util-linux) is needed to test the progress bar"
  finish
  exit 1
}

# 20 training batches, a validation and a test split.
config run <<INI
[loop]
max_epochs = 2
[plugins]
step = linreg
optimizer = sgd
data = synthetic
[synthetic]
n_train = 80
n_val = 8
n_test = 8
batch_size = 4
[sgd]
lr = 0.001
INI

# On a terminal: script gives loopkit a pseudo-terminal for stdout and
# stderr and copies what it wrote to ours.
script -qec "'$LOOPKIT' train '$T/run.ini' --out '$T/tty'" /dev/null >"$T/tty.out" 2>&1
check "terminal: the run succeeds" grep -q 'trained 40 steps' "$T/tty.out"
tr '\r' '\n' <"$T/tty.out" >"$T/tty.lines"
# The terminal ends lines with \r\n, so count the bar's states: each
# redraw starts with a carriage return and no newline before the next.
check "terminal: the bar redraws in place (20 states of epoch 0's line)" \
  test "$(grep -c '^epoch 0/1 \[' "$T/tty.lines")" -ge 20
most=$(awk '{ n = gsub(/epoch 0\/1 \[/, "&"); if (n > m) m = n } END { print m + 0 }' "$T/tty.out")
check "terminal: the redraws share one line (no newline between them)" test "$most" -ge 20
check "terminal: the bar shows epoch, batch/total, loss, throughput, elapsed<ETA" \
  grep -Eq '^epoch 0/1 \[[#.]+\] [0-9]+/20 loss [0-9.e+-]+ [0-9]+ samples/s [0-9]{2}:[0-9]{2}<[0-9-]{2}:[0-9-]{2}' "$T/tty.lines"
check "terminal: the first epoch's bar ends full, at 20/20" \
  grep -Eq '^epoch 0/1 \[#+\] 20/20 ' "$T/tty.lines"
check "terminal: a bar for the second epoch, epoch 1/1" grep -Eq '^epoch 1/1 \[' "$T/tty.lines"
check "terminal: no bar past the last epoch (no epoch 2, no /2)" \
  sh -c "! grep -Eq 'epoch (2|[0-9]+/2)' '$T/tty.lines'"
check "terminal: validation results printed when they finish" \
  grep -Eq 'epoch 0 val: val_loss [0-9.e+-]+' "$T/tty.lines"
check "terminal: test results printed, under the last epoch trained" \
  grep -Eq '^epoch 1 test: test_loss' "$T/tty.lines"
check "terminal: the last epoch's log lines are epoch 1's" \
  sh -c "grep -Eq '^epoch 1: train loss' '$T/tty.lines' && grep -Eq '^epoch 1 val: val_loss' '$T/tty.lines'"
test_epochs=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "test_loss") k = i }
  NR > 1 && $k != "" { print $2 }' "$T/tty/metrics.csv")
check "metrics.csv: the test row's epoch is the last epoch trained, 1 ($test_epochs)" \
  test "$test_epochs" = 1
expect 0 'the run is complete \(it ended after epoch 1, step 40\): nothing to train' \
  "a complete run names its last epoch, 1" -- train "$T/run.ini" --resume "$T/tty/checkpoints/last.ckpt"
check "terminal: no plain progress lines" sh -c "! grep -q 'batch [0-9]*/20:' '$T/tty.lines'"

# Not a terminal: plain lines, every log_every_n_steps optimizer steps.
"$LOOPKIT" train "$T/run.ini" --out "$T/plain" --set loop.log_every_n_steps=5 >"$T/plain.out" 2>"$T/plain.err"
check "not a terminal: no carriage returns" test "$(tr -cd '\r' <"$T/plain.err" | wc -c)" -eq 0
check "not a terminal: a line every 5 steps (8 in 40 steps)" \
  test "$(grep -c 'batch [0-9]*/20, step [0-9]*: loss' "$T/plain.err")" -eq 8
check "not a terminal: the line's fields" \
  grep -Eq '^epoch 1 batch 10/20, step 30: loss [0-9.e+-]+, [0-9.]+ samples/s, [0-9]{2}:[0-9]{2} elapsed, ETA [0-9]{2}:[0-9]{2}$' "$T/plain.err"
check "not a terminal: validation results" grep -q 'epoch 0 val: val_loss' "$T/plain.err"
"$LOOPKIT" train "$T/run.ini" --out "$T/default" >/dev/null 2>"$T/default.err"
check "log_every_n_steps defaults to 50: no progress line in 40 steps" \
  sh -c "! grep -q 'samples/s' '$T/default.err'"
grep log_every_n_steps "$T/default/config.ini" >"$T/default.key"
check "log_every_n_steps = 50 in the effective config" grep -q '= 50' "$T/default.key"

# Without data the lines count steps.
config nodata <<INI
[loop]
max_steps = 30
log_every_n_steps = 10
[plugins]
step = rosenbrock
optimizer = sgd
[sgd]
lr = 0.001
INI
"$LOOPKIT" train "$T/nodata.ini" --out "$T/nodata" >/dev/null 2>"$T/nodata.err"
check "without data: a line every 10 steps, counting steps" \
  test "$(grep -Ec '^step (10|20|30)/30: loss .* steps/s' "$T/nodata.err")" -eq 3

# --quiet: only errors and the final summary, terminal or not.
"$LOOPKIT" train "$T/run.ini" --out "$T/quiet" --quiet --set loop.log_every_n_steps=1 >"$T/quiet.out" 2>"$T/quiet.err"
check "--quiet: nothing on stderr" test ! -s "$T/quiet.err"
check "--quiet: the summary on stdout" grep -q '^trained 40 steps' "$T/quiet.out"
check "--quiet: the summary is the only line" test "$(wc -l <"$T/quiet.out")" -eq 1
script -qec "'$LOOPKIT' train '$T/run.ini' --out '$T/qtty' --quiet" /dev/null >"$T/qtty.out" 2>&1
check "--quiet on a terminal: no bar" test "$(tr -cd '\r' <"$T/qtty.out" | tr -d '\n' | wc -c)" -le 1
check "--quiet on a terminal: the summary" grep -q 'trained 40 steps' "$T/qtty.out"

expect 2 'log_every_n_steps = "0": expected an integer >= 1' \
  "log_every_n_steps = 0 is refused" -- train "$T/run.ini" --out "$T/bad" --set loop.log_every_n_steps=0

finish

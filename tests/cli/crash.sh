#!/bin/sh
# Nothing lost: runs killed with SIGKILL at random moments (checkpoint writes
# included) and resumed from their last checkpoint end bitwise equal to the
# uninterrupted run, metrics.csv included; SIGINT and SIGTERM stop a run
# gracefully; bad checkpoints are refused whole; keep_last bounds the files.
. "$LK_SRCDIR/tests/cli/lib.sh"

# A pseudo-random pause between 0.05 and 0.45 s, different each call.
seed=$$
pause() {
  seed=$(( (seed * 1103515245 + 12345) % 2147483648 ))
  sleep "$(awk -v r="$seed" 'BEGIN { printf "%.2f", 0.05 + (r % 40) / 100 }')"
}

# killed NAME: trains $T/NAME.ini to the end through up to 5 SIGKILLs,
# resuming each time from whatever checkpoint survived; then compares with
# an uninterrupted run.
killed() {
  name=$1 cfg="$T/$1.ini" dir="$T/$1-crash" kills=0 broken=0
  "$LOOPKIT" train "$cfg" --out "$T/$1-ref" --quiet >/dev/null 2>&1
  while :; do
    if [ -f "$dir/checkpoints/last.ckpt" ]; then
      "$LOOPKIT" dump "$dir/checkpoints/last.ckpt" >/dev/null 2>&1 || broken=$((broken + 1))
      set -- --resume "$dir/checkpoints/last.ckpt"
    else
      rm -rf "$dir"
      set -- --out "$dir"
    fi
    "$LOOPKIT" train "$cfg" --quiet "$@" >"$T/$name.log" 2>&1 &
    pid=$!
    if [ $kills -lt 5 ]; then
      pause
      kill -9 $pid 2>/dev/null && kills=$((kills + 1))
    fi
    wait $pid && break
  done
  check "$name: every checkpoint left by a SIGKILL loads" test $broken -eq 0
  check "$name: killed $kills times, then finished" test $kills -ge 1
  "$LOOPKIT" dump "$T/$name-ref/checkpoints/last.ckpt" >"$T/$name.want"
  "$LOOPKIT" dump "$dir/checkpoints/last.ckpt" >"$T/$name.got"
  check "$name: parameters bitwise equal to the uninterrupted run" cmp -s "$T/$name.want" "$T/$name.got"
  check "$name: metrics.csv equal, no row lost or repeated" cmp -s "$T/$name-ref/metrics.csv" "$dir/metrics.csv"
  check "$name: no temporary file left" sh -c "! ls '$dir/checkpoints' | grep -q tmp"
}

config sgd <<INI
[loop]
max_steps = 120
checkpoint_every_n_steps = 3
[plugins]
step = probe
optimizer = sgd
[probe]
n = 100000
delay_us = 3000
[sgd]
lr = 0.01
momentum = 0.9
INI
killed sgd

config adam <<INI
[loop]
max_steps = 120
checkpoint_every_n_steps = 4
[plugins]
step = probe
optimizer = adam
scheduler = step_lr
[probe]
n = 50000
delay_us = 3000
[adam]
lr = 0.05
[step_lr]
step_size = 10
gamma = 0.5
interval = step
INI
killed adam
check "adam: the lr column is there" sh -c "head -1 '$T/adam-ref/metrics.csv' | grep -q ',lr'"

config accum <<INI
[loop]
max_epochs = 3
accumulate_grad_batches = 3
checkpoint_every_n_steps = 2
seed = 3
[plugins]
step = probe
optimizer = sgd
data = synthetic
[synthetic]
n_train = 40
n_val = 8
batch_size = 2
shuffle = true
[probe]
n = 20000
delay_us = 12000
[sgd]
lr = 0.01
momentum = 0.9
INI
killed accum

# A kill while a checkpoint is being written: wait for the temporary file.
rm -rf "$T/mid"
"$LOOPKIT" train "$T/sgd.ini" --out "$T/mid" --quiet --set probe.n=400000 \
  --set loop.checkpoint_every_n_steps=1 --set loop.max_steps=40 >/dev/null 2>&1 &
pid=$!
caught=no
i=0
while [ $i -lt 20000 ] && kill -0 $pid 2>/dev/null; do
  if ls "$T/mid/checkpoints" 2>/dev/null | grep -q '\.tmp-' && [ -f "$T/mid/checkpoints/last.ckpt" ]; then
    kill -9 $pid && caught=yes
    break
  fi
  i=$((i + 1))
done
wait $pid
if [ $caught = yes ]; then
  check "killed during a checkpoint write: the previous checkpoint loads" \
    sh -c "'$LOOPKIT' dump '$T/mid/checkpoints/last.ckpt' >/dev/null"
  "$LOOPKIT" train "$T/sgd.ini" --resume "$T/mid/checkpoints/last.ckpt" --quiet --set probe.n=400000 \
    --set loop.checkpoint_every_n_steps=1 --set loop.max_steps=40 >/dev/null 2>&1
  check "killed during a checkpoint write: the resumed run ends like an uninterrupted one" \
    sh -c "'$LOOPKIT' train '$T/sgd.ini' --out '$T/mid-ref' --quiet --set probe.n=400000 --set loop.max_steps=40 >/dev/null 2>&1 &&
           '$LOOPKIT' dump '$T/mid/checkpoints/last.ckpt' >'$T/m1' && '$LOOPKIT' dump '$T/mid-ref/checkpoints/last.ckpt' >'$T/m2' && cmp -s '$T/m1' '$T/m2'"
  check "killed during a checkpoint write: the leftover temporary file is gone" \
    sh -c "! ls '$T/mid/checkpoints' | grep -q tmp"
else
  ok "killed during a checkpoint write # SKIP no write caught in flight this time"
fi

# ---- graceful stop ----
for sig in INT TERM; do
  want=$([ $sig = INT ] && echo 130 || echo 143)
  rm -rf "$T/g$sig"
  "$LOOPKIT" train "$T/sgd.ini" --out "$T/g$sig" >"$T/g$sig.log" 2>&1 &
  pid=$!
  # Signal once training is under way (under valgrind, startup is slow).
  i=0
  while [ $i -lt 600 ] && [ "$(cat "$T/g$sig/metrics.csv" 2>/dev/null | wc -l)" -lt 4 ]; do
    sleep 0.05
    i=$((i + 1))
  done
  kill -$sig $pid
  wait $pid
  got=$?
  check "SIG$sig: exit status $want" test "$got" -eq "$want"
  check "SIG$sig: says how to resume: the run directory, no config" \
    grep -qx "loopkit: resume with: loopkit train --resume $T/g$sig" "$T/g$sig.log"
  check "SIG$sig: names the signal" grep -q "interrupted after step [0-9]*; checkpoint .* written by SIG$sig" "$T/g$sig.log"
  "$LOOPKIT" train "$T/sgd.ini" --resume "$T/g$sig/checkpoints/last.ckpt" --quiet >/dev/null 2>&1
  check "SIG$sig: the resumed run equals the uninterrupted one" \
    sh -c "'$LOOPKIT' dump '$T/g$sig/checkpoints/last.ckpt' | cmp -s - '$T/sgd.want'"
done

# ---- checkpoints refused whole ----
good="$T/sgd-ref/checkpoints/last.ckpt"
size=$(wc -c <"$good")
head -c $((size / 2)) "$good" >"$T/trunc.ckpt"
expect 2 'trunc.ckpt: .*truncated' "a truncated checkpoint is refused" -- train "$T/sgd.ini" --resume "$T/trunc.ckpt" --out "$T/r1"
cp "$good" "$T/flip.ckpt"
printf '\377' | dd of="$T/flip.ckpt" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
expect 2 'flip.ckpt: .*checksum' "a corrupted checkpoint is refused" -- train "$T/sgd.ini" --resume "$T/flip.ckpt" --out "$T/r2"
expect 2 'not a loopkit checkpoint' "a foreign file is refused" -- train "$T/sgd.ini" --resume "$T/sgd.ini" --out "$T/r3"
expect 2 'is f64\[100000\] there but f64\[50000\] in this config' "other shapes are refused" \
  -- train "$T/sgd.ini" --resume "$good" --out "$T/r4" --set probe.n=50000
expect 2 'adam-ref/checkpoints/last.ckpt: holds [a-z_.]+, which this config does not build' \
  "another optimizer's state is refused" -- train "$T/sgd.ini" --resume "$T/adam-ref/checkpoints/last.ckpt" \
  --out "$T/r5" --set probe.n=50000
check "a refused resume leaves the run untouched" cmp -s "$T/sgd-ref/metrics.csv" "$T/sgd-crash/metrics.csv"

# ---- keep_last ----
"$LOOPKIT" train "$T/sgd.ini" --out "$T/keep" --quiet --set loop.max_steps=30 --set loop.keep_last=2 \
  --set probe.delay_us=0 >/dev/null 2>&1
check "keep_last = 2 keeps the two newest step checkpoints and last.ckpt" \
  test "$(ls "$T/keep/checkpoints" | tr '\n' ' ')" = "last.ckpt step-27.ckpt step-30.ckpt "
check "last.ckpt is the newest" cmp -s "$T/keep/checkpoints/last.ckpt" "$T/keep/checkpoints/step-30.ckpt"
finish

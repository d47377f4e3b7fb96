#!/bin/sh
# Loggers ([plugins] loggers, ABI 1.5) and the bundled tensorboard logger.
# The event file is read back by tests/cli/tfevents.py, a reader written
# from tensorboard's public field numbers that checks every record's
# length and both CRC-32Cs (and, where python3-protobuf is installed, the
# protobuf library decodes every event again). Every row of metrics.csv is
# in the file once, as scalars under its column names, the config as
# text; a run killed and resumed, in place or in a new run directory, has
# the uninterrupted run's scalars, no step missing or twice. The rowlog
# test logger (tests/plugins) shows what the host gives every logger.
. "$LK_SRCDIR/tests/cli/lib.sh"
TFE="python3 $LK_SRCDIR/tests/cli/tfevents.py"
cd "$T" || exit 1

# train ARGS...: the status in $st (under valgrind, 99 for an error or a
# leak), the output in $T/train.out.
train() {
  "$LOOPKIT" train "$@" --quiet >"$T/train.out" 2>&1
  st=$?
}
# events DIR: the event file of run directory DIR (the one file).
events() { ls "$1"/events.out.tfevents.* 2>/dev/null; }
# scalars FILE: the scalar events, one "STEP TAG VALUE" a line.
scalars() { $TFE "$1" | sed -n 's/^scalar //p'; }
# rows CSV: metrics.csv's rows as rowlog writes them (the same %.17g).
rows() {
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) h[i] = $i; next }
    { s = "row " $1 " " $2; for (i = 3; i <= NF; i++) if ($i != "") s = s " " h[i] "=" $i; print s }' "$1"
}

config base <<INI
[loop]
max_epochs = 3
checkpoint_every_n_steps = 3
[plugins]
step = linreg
optimizer = sgd
data = synthetic
scheduler = step_lr
profiler = killer
loggers = tensorboard
[synthetic]
n_train = 16
n_val = 8
n_test = 8
batch_size = 4
[sgd]
lr = 0.05
[step_lr]
step_size = 2
INI

# ---- the kind -------------------------------------------------------------
expect 0 '^tensorboard +logger +[0-9.]+ +/.*/tensorboard\.so$' \
  "loopkit plugins lists tensorboard as a logger" -- plugins
expect 0 '^kinds: +logger$' "inspect tensorboard: kind logger" -- inspect tensorboard
check "... with its options sub_dir, flush_secs and max_queue" sh -c "
  grep -Eq '^  sub_dir +string +default' '$T/out' &&
  grep -Eq '^  flush_secs +int \[0, 86400\] +default 120' '$T/out' &&
  grep -Eq '^  max_queue +int \[1, 1000000\] +default 10' '$T/out'"
expect 2 'plugin sgd .* cannot be the logger: it implements optimizer' \
  "a plugin that is no logger is refused as one" -- train "$T/base.ini" --out "$T/no" \
  --set plugins.loggers=sgd
expect 2 'name rowlog is used twice in \[plugins\] loggers' \
  "one instance listed twice is refused; name each" -- train "$T/base.ini" --out "$T/no" \
  --set plugins.loggers=rowlog,rowlog
check "... and leaves no run directory" test ! -e "$T/no"

# ---- the event file --------------------------------------------------------
train "$T/base.ini" --out "$T/ref"
check "a run with loggers = tensorboard trains" sh -c "test $st -eq 0 && grep -q '^trained 12 steps' '$T/train.out'"
F=$(events "$T/ref")
check "one event file, events.out.tfevents.<time>.<host>, in the run directory" \
  sh -c "test \$(ls '$T/ref' | grep -c tfevents) -eq 1 &&
    basename '$F' | grep -Eqx 'events\.out\.tfevents\.[0-9]{10}\.$(uname -n)'"
$TFE "$F" >"$T/ref.events"
check "every record's length and CRCs check, the first event is file_version brain.Event:2" \
  sh -c "test \$? -eq 0 && head -1 '$T/ref.events' | grep -qx 'file_version brain.Event:2'"
$TFE "$F" --rows "$T/ref/metrics.csv" >"$T/rows.out"
check "one event per metrics.csv row: its step, a scalar per cell under its column name, equal in f32 ($(cat "$T/rows.out"))" \
  grep -qx '16 rows, 44 scalars' "$T/rows.out"
check "... loss, mae, lr, val_loss, val_mae, test_loss and test_mae among the tags" \
  sh -c "test \"\$(awk '\$1 == \"scalar\" { print \$3 }' '$T/ref.events' | sort -u | tr '\n' ' ')\" = 'loss lr mae test_loss test_mae val_loss val_mae '"
check "the config is a text summary at step 0, tagged config/text_summary" \
  sh -c "test \"\$(grep '^text' '$T/ref.events')\" = \"text 0 config/text_summary \$(sed 's/^/    /; s/^    \$//' '$T/ref/config.ini' | wc -c)\""
$TFE "$F" --text 0 | sed 's/^    //' >"$T/config.text"
check "... whose text is config.ini's, each line indented as a Markdown code block" \
  cmp -s "$T/config.text" "$T/ref/config.ini"
/usr/bin/python3 "$LK_SRCDIR/tests/cli/tfevents.py" "$F" --protobuf >"$T/pb.out" 2>&1
st=$?
if [ $st -eq 77 ]; then
  echo "ok $((n += 1)) - the protobuf library decodes the file alike # SKIP python3-protobuf not installed"
else
  check "the protobuf library decodes every event alike ($(cat "$T/pb.out"))" test $st -eq 0
fi
train "$T/base.ini" --out "$T/nolog" --set plugins.loggers=none
check "loggers = none: no event file, and metrics.csv is the same" \
  sh -c "test -z '$(events "$T/nolog")' && cmp -s '$T/nolog/metrics.csv' '$T/ref/metrics.csv'"

# ---- several loggers, named instances, the profiler ------------------------
{ sed 's/^loggers = .*/loggers = a:rowlog, tb:tensorboard, b:rowlog/; s/^profiler = .*/profiler = simple/' "$T/base.ini" && cat <<INI; } >"$T/many.ini"
[tb]
sub_dir = tb/events
flush_secs = 0
[a]
file = a.txt
[b]
file = b.txt
INI
train "$T/many.ini" --out "$T/many"
check "three loggers, two of one plugin, named: the run trains" sh -c "test $st -eq 0 && grep -q '^trained 12 steps' '$T/train.out'"
check "tb:tensorboard with sub_dir = tb/events writes there, and only there" \
  test -z "$(events "$T/many")" -a -n "$(events "$T/many/tb/events")"
scalars "$(events "$T/many/tb/events")" >"$T/s1"
scalars "$F" >"$T/s2"
check "... its scalars are the unnamed run's" cmp -s "$T/s1" "$T/s2"
rows "$T/many/metrics.csv" >"$T/want.rows"
grep '^row ' "$T/many/a.txt" >"$T/a.rows"
check "rowlog a got every metrics.csv row: step, epoch and every set cell, to the bit" \
  sh -c "test -s '$T/want.rows' && cmp -s '$T/want.rows' '$T/a.rows'"
check "... and so did b (each logger gets every row)" sh -c "grep '^row ' '$T/many/b.txt' | cmp -s - '$T/want.rows'"
check "start first: not resumed, at step 0, no rows yet, the run directory" \
  sh -c "head -1 '$T/many/a.txt' | grep -qx 'start resumed=0 in_place=0 from=- epoch=0 step=0 rows=0 saves=0 dir=$T/many'"
grep '^config ' "$T/many/a.txt" | sed 's/^config //' >"$T/a.config"
check "... with the effective config, config.ini's text" cmp -s "$T/a.config" "$T/many/config.ini"
ckpts=$(grep -c '^save$' "$T/many/a.txt")
check "save before every checkpoint: every 3 steps and the last ($ckpts)" \
  test "$ckpts" -eq 5
check "the last call is finalize success" sh -c "tail -1 '$T/many/a.txt' | grep -qx 'finalize success'"
prof() { awk -F'|' -v a="[Logger]$1.log_metrics" '{ gsub(/[ \t]/, "", $2); gsub(/[ \t]/, "", $4) } $2 == a { print $4 }' "$T/many/profile.txt"; }
check "the profiler times each logger's log_metrics, once per row: [Logger]a.log_metrics, [Logger]tb.log_metrics" \
  test "$(prof a)" = 16 -a "$(prof tb)" = 16 -a "$(prof b)" = 16
expect 2 'already holds an event file, events\.out\.tfevents\..*give each tensorboard logger its own sub_dir' \
  "two tensorboard loggers writing one directory are refused" -- train "$T/base.ini" --out "$T/two" \
  --set plugins.loggers="x:tensorboard, y:tensorboard"
expect 2 'option sub_dir = "\.\./up": must be a directory inside the run directory' \
  "sub_dir outside the run directory is refused" -- train "$T/base.ini" --out "$T/up" \
  --set plugins.loggers=tb:tensorboard --set tb.sub_dir=../up

# ---- failures and how a session ends ----------------------------------------
for entry in start log_metrics save finalize; do
  expect 1 "$entry of logger a:rowlog: rowlog fails in $entry, as asked" \
    "a logger failing in $entry fails the run, named" -- train "$T/base.ini" --out "$T/fail-$entry" \
    --set plugins.loggers="a:rowlog, b:rowlog" --set a.fail=$entry --set a.file=a.txt \
    --set b.file=b.txt --quiet
done
check "... the other logger is finalized with failed" \
  sh -c "tail -1 '$T/fail-save/b.txt' | grep -qx 'finalize failed'"
check "... and a logger whose start failed is not called again" \
  sh -c "test \$(grep -vc '^config ' '$T/fail-start/a.txt') -eq 1"
LK_KILL=optimizer_step:5:0:INT train "$T/base.ini" --out "$T/int" \
  --set plugins.loggers="rowlog, tensorboard"
check "SIGINT: finalize interrupted, after the checkpoint's save" \
  sh -c "tail -2 '$T/int/rowlog.txt' | tr '\n' ' ' | grep -qx 'save finalize interrupted '"
$TFE "$(events "$T/int")" --rows "$T/int/metrics.csv" >/dev/null
check "... the event file holds every row logged, whole" test $? -eq 0

# ---- resumed in place: the event stream goes on ------------------------------
# ok_resumed NAME: the run's event file checks, holds metrics.csv's rows
# once each, and the uninterrupted run's scalars.
ok_resumed() {
  G=$(events "$T/$1")
  [ "$st" -eq 0 ] || return 1
  $TFE "$G" --rows "$T/$1/metrics.csv" >/dev/null &&
    scalars "$G" | cmp -s - "$T/ref.scalars" &&
    cmp -s "$T/$1/metrics.csv" "$T/ref/metrics.csv"
}
scalars "$F" >"$T/ref.scalars"
for kill in optimizer_step:9 checkpoint_save/end:2 validation:2 test:1 checkpoint_save:3:300; do
  name=k$(echo "$kill" | tr -c 'a-z0-9\n' '_')
  LK_KILL=$kill train "$T/base.ini" --out "$T/$name" --set plugins.loggers="tensorboard, rowlog" \
    --set tensorboard.flush_secs=0
  grep '^row ' "$T/$name/rowlog.txt" >"$T/$name.before"
  $TFE "$(events "$T/$name")" | awk '$1 == "scalar" && !seen[$2 " " $3]++ { n++ } END { print n }' >"$T/$name.killed"
  train "$T/base.ini" --resume "$T/$name/checkpoints/last.ckpt" --set plugins.loggers="tensorboard, rowlog"
  check "killed at $kill, resumed in place: every row once, the uninterrupted run's scalars" ok_resumed "$name"
done
# The rows a killed run logged after its checkpoint were there, and went.
check "... the run killed at optimizer_step 9 had logged rows its checkpoint did not hold" \
  sh -c "test \$(wc -l <'$T/koptimizer_step_9.before') -gt \$(sed -n 's/^start resumed=1 .* rows=\\([0-9]*\\) .*/\\1/p' '$T/koptimizer_step_9/rowlog.txt')"
check "... and had written them to its event file (flush_secs = 0): 10 rows' 28 scalars, where the checkpoint knew 7 rows" \
  test "$(cat "$T/koptimizer_step_9.killed")" -eq 28
check "... the resumed start: resumed, at epoch 1, step 6, the 7 rows kept, the logger's state back (2 saves)" \
  grep -qx "start resumed=1 in_place=1 from=- epoch=1 step=6 rows=7 saves=2 dir=$T/koptimizer_step_9" "$T/koptimizer_step_9/rowlog.txt"
$TFE "$(events "$T/koptimizer_step_9")" | grep '^text' >"$T/texts"
check "... and the config is logged again where the session starts (steps 0 and 6)" \
  sh -c "test \"\$(cut -d' ' -f2 '$T/texts' | tr '\n' ' ')\" = '0 6 '"

# ---- what a resume keeps exact -----------------------------------------------
# The promise (README, loopkit(1)): a run killed and resumed ends with the
# uninterrupted run's parameters, every state tensor but the loggers'
# (optimizer, scheduler, callbacks), the loop's state (progress, the
# generator, the latest values) and metrics.csv, byte for byte. The
# tensorboard logger's state is where the event file was: its offset, the
# file's length, is larger after a resume, whose session begins with the
# config's text summary again (and created, the second the file was begun,
# differs between two runs). So last.ckpt differs in those 8 bytes and in
# its CRC, and nowhere else.
EDIT="python3 $LK_SRCDIR/tests/cli/ckpt_edit.py"
LK_KILL=checkpoint_save/end:2 train "$T/base.ini" --out "$T/promise"
train "$T/base.ini" --resume "$T/promise/checkpoints/last.ckpt"
A=$T/ref/checkpoints/last.ckpt B=$T/promise/checkpoints/last.ckpt
check "killed after its second checkpoint and resumed: the parameters are the uninterrupted run's" \
  sh -c "test $st -eq 0 && '$LOOPKIT' dump '$A' >'$T/pa' && '$LOOPKIT' dump '$B' >'$T/pb' && cmp -s '$T/pa' '$T/pb'"
$EDIT "$A" --dump >"$T/sa"
$EDIT "$B" --dump >"$T/sb"
check "... and so is every state tensor but the logger's (sgd's, step_lr's)" \
  sh -c "grep -q '^sgd.lr' '$T/sa' && grep -q '^step_lr.last_epoch' '$T/sa' &&
    grep -v '^tensorboard\.' '$T/sa' >'$T/sa.kept' && grep -v '^tensorboard\.' '$T/sb' >'$T/sb.kept' &&
    cmp -s '$T/sa.kept' '$T/sb.kept'"
check "... and metrics.csv" cmp -s "$T/ref/metrics.csv" "$T/promise/metrics.csv"
$EDIT "$A" "$T/a0.ckpt" "tensorboard.offset[0]=0" "tensorboard.created[0]=0"
$EDIT "$B" "$T/b0.ckpt" "tensorboard.offset[0]=0" "tensorboard.created[0]=0"
check "... and the whole of last.ckpt but the logger's offset and created: loop state, generator, latest values, every tensor, byte for byte" \
  cmp -s "$T/a0.ckpt" "$T/b0.ckpt"
check "... where the offset is larger: the resumed session's config summary is in the event file too" \
  sh -c "oa=\$(sed -n 's/^tensorboard.offset.0. //p' '$T/sa') && ob=\$(sed -n 's/^tensorboard.offset.0. //p' '$T/sb') &&
    test \$ob -gt \$oa && test \$($TFE '$(events "$T/promise")' | grep -c '^text') -eq 2"

# Killed at random moments with SIGKILL, up to 4 times, buffered events
# (flush_secs 120, max_queue 10) and all, then finished.
config crash <<INI
[loop]
max_steps = 150
checkpoint_every_n_steps = 4
[plugins]
step = probe
optimizer = sgd
loggers = tensorboard
[probe]
n = 1000
delay_us = 2000
[sgd]
lr = 0.01
INI
train "$T/crash.ini" --out "$T/crash-ref"
seed=$$
kills=0
while :; do
  if [ -f "$T/crash/checkpoints/last.ckpt" ]; then
    set -- --resume "$T/crash/checkpoints/last.ckpt"
  else
    rm -rf "$T/crash"
    set -- --out "$T/crash"
  fi
  "$LOOPKIT" train "$T/crash.ini" --quiet "$@" >/dev/null 2>&1 &
  pid=$!
  if [ $kills -lt 4 ]; then
    seed=$(((seed * 1103515245 + 12345) % 2147483648))
    sleep "$(awk -v r="$seed" 'BEGIN { printf "%.2f", 0.05 + (r % 25) / 100 }')"
    kill -9 $pid 2>/dev/null && kills=$((kills + 1))
  fi
  wait $pid && break
done
G=$(events "$T/crash")
$TFE "$G" --rows "$T/crash/metrics.csv" >/dev/null
st=$?
check "SIGKILLed $kills times at random and resumed: the file checks, every row once" \
  test $st -eq 0 -a -n "$G" -a $kills -ge 1
check "... metrics.csv is the uninterrupted run's" cmp -s "$T/crash/metrics.csv" "$T/crash-ref/metrics.csv"
scalars "$G" >"$T/c1"
scalars "$(events "$T/crash-ref")" >"$T/c2"
check "... and so are the scalars of its 150 steps" sh -c "cmp -s '$T/c1' '$T/c2' && test \$(cut -d' ' -f1 '$T/c1' | sort -u | wc -l) -eq 150"

# ---- resumed in a new run directory ---------------------------------------
train "$T/base.ini" --out "$T/kept" --set loop.keep_last=10 --set plugins.loggers="tensorboard, rowlog"
mkdir "$T/new" && cd "$T/new" || exit 1
"$LOOPKIT" train "$T/base.ini" --resume "$T/kept/checkpoints/step-6.ckpt" \
  --set plugins.loggers="tensorboard, rowlog" >"$T/train.out" 2>&1
st=$?
cd "$T" || exit 1
N=$T/new/runs/base-1
check "resumed from an older checkpoint: a new run directory, its event file begun from the source's" \
  test $st -eq 0 -a -n "$(grep "tensorboard: runs/base-1/events.out.tfevents.[0-9]*.* begins with the [0-9]* bytes of $T/kept/events" "$T/train.out")"
check "... the start says where from" \
  grep -qx "start resumed=1 in_place=0 from=$T/kept epoch=1 step=6 rows=7 saves=2 dir=runs/base-1" "$N/rowlog.txt"
check "... the new file has the same name, and the source's bytes up to the checkpoint" sh -c "
  test '$(basename "$(events "$N")")' = '$(basename "$(events "$T/kept")")' &&
  len=\$(grep -o 'begins with the [0-9]* bytes' '$T/train.out' | tr -dc 0-9) &&
  cmp -s -n \$len '$(events "$N")' '$(events "$T/kept")'"
check "... and the whole run, every row once: the uninterrupted run's scalars" \
  sh -c "$TFE '$(events "$N")' --rows '$N/metrics.csv' >/dev/null && test \"\$($TFE '$(events "$N")' | sed -n 's/^scalar //p')\" = \"\$(cat '$T/ref.scalars')\""
scalars "$(events "$T/kept")" >"$T/s1"
check "... the source's file untouched" cmp -s "$T/s1" "$T/ref.scalars"
# From a checkpoint outside any run directory: the rows before it are not
# at hand (metrics.csv starts at its step), nor are the events.
cp "$T/kept/checkpoints/step-6.ckpt" "$T/loose.ckpt"
train "$T/base.ini" --resume "$T/loose.ckpt" --out "$T/loose" --set plugins.loggers="tensorboard, rowlog"
G=$(events "$T/loose")
$TFE "$G" --rows "$T/loose/metrics.csv" >/dev/null
st=$?
check "resumed from a loose checkpoint: a new event file, begun at its step 6, with metrics.csv's rows" \
  test $st -eq 0 -a "$(scalars "$G" | head -1 | cut -d' ' -f1)" = 6
check "... the start says so: not in place, from no run directory" \
  grep -qx "start resumed=1 in_place=0 from=- epoch=1 step=6 rows=0 saves=2 dir=$T/loose" "$T/loose/rowlog.txt"

# ---- the event file of a run resumed in place, gone or cut --------------------
LK_KILL=optimizer_step:7 train "$T/base.ini" --out "$T/gone"
rm "$(events "$T/gone")"
"$LOOPKIT" train "$T/base.ini" --resume "$T/gone/checkpoints/last.ckpt" >"$T/out" 2>&1
check "the event file gone: a warning, and a new file begun at the checkpoint's step" sh -c "
  grep -q 'holds no event file begun at [0-9]*, which the checkpoint.s rows went to: a new one begins at this step' '$T/out' &&
  test \"\$($TFE '$(events "$T/gone")' 2>/dev/null | sed -n 3p | cut -d' ' -f2)\" = 6"
LK_KILL=optimizer_step:7 train "$T/base.ini" --out "$T/cut"
G=$(events "$T/cut")
head -c 100 "$G" >"$T/cut.tmp" && cat "$T/cut.tmp" >"$G"
expect 2 "$G is shorter than the [0-9]+ bytes it had at the checkpoint.*move it away" \
  "the event file cut short: refused before training, named" -- train "$T/base.ini" \
  --resume "$T/cut/checkpoints/last.ckpt"

# ---- several processes: rank 0 logs, once ------------------------------------
if [ "${LK_HAVE_MPI:-no}" = yes ] && command -v mpirun >/dev/null 2>&1; then
  # As mpi.sh runs it: Open MPI's shared memory without cross-memory
  # attach, and under ASan whole stacks (lsan.supp names Open MPI's own
  # leaks) and no __tls_get_addr interception.
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0:intercept_tls_get_addr=0" \
    OMPI_MCA_btl_vader_single_copy_mechanism=none timeout 120 mpirun --allow-run-as-root \
    --oversubscribe -np 2 "$LK_BUILDDIR/loopkit" train "$T/base.ini" --out "$T/mpi" --quiet \
    --set plugins.strategy=mpi --set plugins.profiler=none \
    --set plugins.loggers="tensorboard, rowlog" >"$T/mpi.out" 2>&1
  st=$?
  check "under mpirun -np 2: one session logged (rank 0's), start to finalize" sh -c "
    test $st -eq 0 && test \$(grep -c '^start ' '$T/mpi/rowlog.txt') -eq 1 &&
    test \$(grep -c '^finalize success' '$T/mpi/rowlog.txt') -eq 1"
  $TFE "$(events "$T/mpi")" --rows "$T/mpi/metrics.csv" >/dev/null
  check "... and one event file, every row once" test $? -eq 0 -a "$(ls "$T/mpi" | grep -c tfevents)" -eq 1
else
  echo "ok $((n += 1)) - under mpirun, rank 0 logs # SKIP no MPI"
fi
finish

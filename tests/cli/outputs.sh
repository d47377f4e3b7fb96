#!/bin/sh
# Outputs never destroy what is at their path, and no temporary file has a
# name another user can predict (src/base/outfile.c). For each command that
# writes a file the user names (predict -o, export -o, plot -o) and for
# train --out, each kind of path: -, a character device (/dev/null and
# /dev/full, or as root their twins made with mknod: an old loopkit run
# against this test as root replaces those, not the machine's), a FIFO
# read by a background reader, a symbolic link to a file and a dangling
# one (both refused), a directory, a block device, a socket, an existing
# regular file (replaced, its mode and owner kept; left whole when the
# write fails) and a path in a missing directory. Then links in place of a run directory's
# files, and, as root, links planted by another user (setpriv) under the
# temporary names loopkit used to predict: the file they point to is
# never touched.
. "$LK_SRCDIR/tests/cli/lib.sh"

root=no
[ "$(id -u)" -eq 0 ] && root=yes
skip() { ok "$1 # SKIP $2"; }

# same A B: passes when the files A and B hold the same bytes.
same() { cmp -s "$1" "$2"; }

# A classifier of 256 features (its safetensors file is kilobytes, which
# the file size limit below cuts), trained one epoch, with a test split.
awk 'BEGIN { printf "label"; for (j = 0; j < 256; j++) printf ",f%d", j; print ""
  for (i = 0; i < 60; i++) { c = i % 3; printf "%d", c
    for (j = 0; j < 256; j++) printf ",%.3f", (j % 3 == c) + (i * 31 + j * 17) % 100 / 200
    print "" } }' >"$T/train.csv"
head -31 "$T/train.csv" >"$T/test.csv"
config cls <<INI
[loop]
max_epochs = 1
[plugins]
step = softmax
optimizer = sgd
data = csv
[csv]
path = $T/train.csv
test = $T/test.csv
label_column = 0
batch_size = 20
[softmax]
inputs = 256
classes = 3
[sgd]
lr = 0.1
INI
R=$T/run
CK=$R/checkpoints/last.ckpt
"$LOOPKIT" train "$T/cls.ini" --out "$R" --quiet >"$T/out" 2>&1
check "a classifier trained" test -s "$CK"

cmds="predict export"
if [ "${LK_HAVE_CAIRO:-no}" = yes ]; then
  cmds="$cmds plot"
else
  skip "plot -o: every kind of path" "built without cairo"
fi

# write_with CMD OUT: loopkit's CMD writing OUT.
write_with() {
  case $1 in
  predict) "$LOOPKIT" predict "$T/cls.ini" --ckpt "$CK" -o "$2" ;;
  export) "$LOOPKIT" export "$CK" -o "$2" ;;
  plot) "$LOOPKIT" plot "$R" -o "$2" ;;
  esac
}
# run CMD OUT: the same, its status in $status, its standard output in
# $T/stdout, its messages in $T/stderr.
run() {
  write_with "$1" "$2" >"$T/stdout" 2>"$T/stderr"
  status=$?
}
# notmp DIR: DIR holds no temporary file.
notmp() { ! ls -a "$1" | grep -q 'tmp'; }
# reap PID: waits up to 10 s for PID to end, then kills it.
reap() {
  i=0
  while kill -0 "$1" 2>/dev/null && [ $i -lt 100 ]; do
    sleep 0.1
    i=$((i + 1))
  done
  kill "$1" 2>/dev/null
  wait "$1" 2>/dev/null
}
# node NAME TYPE MAJOR MINOR: a device node, as root ("" otherwise).
node() { [ $root = yes ] && mknod "$1" "$2" "$3" "$4" 2>/dev/null && echo "$1"; }
# twin PATH DEVICE MAJOR MINOR: a character device like DEVICE at PATH, as
# root (an old loopkit then replaces the twin, not the machine's); DEVICE
# itself otherwise (a user other than root cannot replace it).
twin() {
  if [ $root = yes ]; then
    node "$1" c "$3" "$4"
  elif [ -c "$2" ]; then
    echo "$2"
  fi
}
devnum() { stat -c '%F %t,%T' "$1"; }

# The reference: what each writes to a new regular file (the case of a
# path where nothing is yet).
"$LOOPKIT" predict "$T/cls.ini" --ckpt "$CK" >"$T/ref.predict"
"$LOOPKIT" export "$CK" -o "$T/ref.export" >/dev/null
[ "${LK_HAVE_CAIRO:-no}" = yes ] && "$LOOPKIT" plot "$R" -o "$T/ref.plot.png" >/dev/null &&
  mv "$T/ref.plot.png" "$T/ref.plot"
check "the references are written (a prediction a test sample)" \
  test "$(wc -l <"$T/ref.predict")" -eq 31 -a -s "$T/ref.export"

for c in $cmds; do
  D=$T/$c
  mkdir "$D"
  ext=csv
  [ $c = export ] && ext=safetensors
  [ $c = plot ] && ext=png

  # ---- - : the standard output, and nothing else on it ----
  (
    cd "$D" && run $c -
    exit $status
  )
  status=$?
  check "$c -o -: status 0, the file on the standard output and nothing else" \
    sh -c "[ $status -eq 0 ] && cmp -s '$T/stdout' '$T/ref.$c'"
  check "$c -o -: no file named - made" test ! -e "$D/-"
  write_with $c - >/dev/full 2>"$T/stderr"
  check "$c -o - to a full standard output: fails, saying so" \
    sh -c "[ $? -ne 0 ] && grep -q 'cannot write the standard output: No space left on device' '$T/stderr'"

  # ---- a character device: written through, never replaced ----
  null=$(twin "$D/null" /dev/null 1 3)
  if [ -n "$null" ]; then
    run $c "$null"
    check "$c -o NULL (/dev/null or its twin): status 0" test $status -eq 0
    check "$c -o NULL: still the character device 1,3" \
      test "$(devnum "$null")" = "character special file 1,3"
  else
    skip "$c -o /dev/null's twin" "no mknod, no /dev/null"
  fi
  full=$(twin "$D/full" /dev/full 1 7)
  if [ -n "$full" ]; then
    run $c "$full"
    check "$c -o FULL (/dev/full or its twin): fails, naming the device and why" \
      sh -c "[ $status -ne 0 ] && grep -q 'cannot write $full: No space left on device' '$T/stderr'"
    check "$c -o FULL: still the character device 1,7" \
      test "$(devnum "$full")" = "character special file 1,7"
  else
    skip "$c -o /dev/full's twin" "no mknod, no /dev/full"
  fi

  # ---- a FIFO: its reader gets the file, the FIFO stays ----
  mkfifo "$D/fifo"
  cat "$D/fifo" >"$D/fifo.got" &
  reader=$!
  run $c "$D/fifo"
  reap $reader
  check "$c -o FIFO: status 0, the reader got the whole file" \
    sh -c "[ $status -eq 0 ] && cmp -s '$D/fifo.got' '$T/ref.$c'"
  check "$c -o FIFO: still a FIFO" test -p "$D/fifo"

  # ---- links: refused, neither followed nor replaced ----
  echo old >"$D/target"
  ln -s target "$D/link.$ext"
  run $c "$D/link.$ext"
  check "$c -o LINK: status 2, the link and where it leads named" \
    sh -c "[ $status -eq 2 ] && grep -q '$D/link.$ext is a symbolic link (to target)' '$T/stderr'"
  check "$c -o LINK: the link and its file as they were" \
    sh -c "[ -L '$D/link.$ext' ] && [ \"\$(cat '$D/target')\" = old ]"
  ln -s nothing "$D/dangling.$ext"
  run $c "$D/dangling.$ext"
  check "$c -o DANGLING: status 2, a symbolic link" \
    sh -c "[ $status -eq 2 ] && grep -q 'dangling.$ext is a symbolic link (to nothing)' '$T/stderr'"
  check "$c -o DANGLING: still a link to nothing, nothing made" \
    sh -c "[ -L '$D/dangling.$ext' ] && [ ! -e '$D/nothing' ]"

  # ---- what is not a file: refused ----
  mkdir "$D/dir.$ext"
  run $c "$D/dir.$ext"
  check "$c -o DIR: status 2, a directory named" \
    sh -c "[ $status -eq 2 ] && grep -q '$D/dir.$ext is a directory: refusing to write over it' '$T/stderr'"
  check "$c -o DIR: still an empty directory" \
    sh -c "[ -d '$D/dir.$ext' ] && [ -z \"\$(ls -A '$D/dir.$ext')\" ]"
  blk=$(node "$D/blk.$ext" b 7 250)
  if [ -n "$blk" ]; then
    run $c "$blk"
    check "$c -o BLOCK: status 2, a block device named" \
      sh -c "[ $status -eq 2 ] && grep -q '$blk is a block device' '$T/stderr'"
    check "$c -o BLOCK: still the block device" test "$(devnum "$blk")" = "block special file 7,fa"
  else
    skip "$c -o a block device" "not root (mknod)"
  fi
  if command -v perl >/dev/null 2>&1 &&
    perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Local => $ARGV[0], Listen => 1) or exit 1' "$D/sock.$ext"; then
    run $c "$D/sock.$ext"
    check "$c -o SOCKET: status 2, a socket named" \
      sh -c "[ $status -eq 2 ] && grep -q 'sock.$ext is a socket' '$T/stderr' && [ -S '$D/sock.$ext' ]"
  else
    skip "$c -o a socket" "no perl to make one"
  fi

  # ---- a regular file: replaced whole, its mode kept; or left whole ----
  echo old >"$D/out.$ext"
  chmod 640 "$D/out.$ext"
  [ $root = yes ] && chown 65534:65534 "$D/out.$ext"
  run $c "$D/out.$ext"
  check "$c -o FILE: status 0, the file replaced by the output" \
    sh -c "[ $status -eq 0 ] && cmp -s '$D/out.$ext' '$T/ref.$c'"
  check "$c -o FILE: its mode kept (0640)" test "$(stat -c %a "$D/out.$ext")" = 640
  if [ $root = yes ]; then
    check "$c -o FILE: its owner and group kept (root replaced 65534's file)" \
      test "$(stat -c %u:%g "$D/out.$ext")" = 65534:65534
  else
    skip "$c -o FILE: its owner kept" "not root"
  fi
  check "$c -o FILE: no temporary file left" notmp "$D"
  echo old >"$D/out.$ext"
  (
    ulimit -f 1
    trap '' XFSZ
    run $c "$D/out.$ext"
    exit $status
  )
  status=$?
  check "$c -o FILE: a write that fails half way fails, naming the file" \
    sh -c "[ $status -ne 0 ] && grep -q '$D/out.$ext: File too large' '$T/stderr'"
  check "$c -o FILE: ... and leaves the file as it was, and no temporary file" \
    sh -c "[ \"\$(cat '$D/out.$ext')\" = old ] && ! ls -a '$D' | grep -q tmp"

  # ---- a missing directory: refused before anything is written ----
  run $c "$D/none/out.$ext"
  check "$c -o MISSING/FILE: status 2, the file and why named" \
    sh -c "[ $status -eq 2 ] && grep -q 'cannot create $D/none/out.$ext: No such file or directory' '$T/stderr'"
  check "$c -o MISSING/FILE: nothing made" test ! -e "$D/none"
done

# ---- train --out: a directory, made if missing; nothing else ----
config rosen <<INI
[loop]
max_steps = 3
[plugins]
step = rosenbrock
optimizer = sgd
profiler = simple
[sgd]
lr = 0.001
INI
D=$T/train
mkdir "$D" "$D/cwd"
(cd "$D/cwd" && "$LOOPKIT" train "$T/rosen.ini" --out - --quiet >"$T/out" 2>&1)
status=$?
check "train --out -: status 2, a run directory is not the standard output" \
  sh -c "[ $status -eq 2 ] && grep -q -- '--out -: a run directory is a directory' '$T/out'"
check "train --out -: no directory - made" test ! -e "$D/cwd/-"
null=$(twin "$D/null" /dev/null 1 3)
if [ -n "$null" ]; then
  expect 2 "--out $null is a character device, not a directory" \
    "train --out NULL (/dev/null or its twin): status 2, named" -- train "$T/rosen.ini" --out "$null"
  check "train --out NULL: still the character device" \
    test "$(devnum "$null")" = "character special file 1,3"
else
  skip "train --out /dev/null's twin" "no mknod, no /dev/null"
fi
mkfifo "$D/fifo"
expect 2 "--out $D/fifo is a FIFO, not a directory" \
  "train --out FIFO: status 2 at once, named" -- train "$T/rosen.ini" --out "$D/fifo"
check "train --out FIFO: still a FIFO" test -p "$D/fifo"
mkdir "$D/elsewhere"
ln -s elsewhere "$D/link"
expect 2 "--out $D/link is a symbolic link \\(to elsewhere\\)" \
  "train --out LINK (to a directory): status 2, named" -- train "$T/rosen.ini" --out "$D/link"
check "train --out LINK: nothing written where it leads" test -z "$(ls -A "$D/elsewhere")"
ln -s nowhere "$D/dangling"
expect 2 "--out $D/dangling is a symbolic link \\(to nowhere\\)" \
  "train --out DANGLING: status 2" -- train "$T/rosen.ini" --out "$D/dangling"
check "train --out DANGLING: nothing made" test ! -e "$D/nowhere"
echo old >"$D/file"
expect 2 "--out $D/file is a regular file, not a directory" \
  "train --out FILE: status 2, named" -- train "$T/rosen.ini" --out "$D/file"
check "train --out FILE: the file as it was" test "$(cat "$D/file")" = old
mkdir "$D/empty"
expect 0 "trained 3 steps" "train --out EMPTY_DIR: trains there" -- train "$T/rosen.ini" --out "$D/empty"
check "train --out EMPTY_DIR: its config.ini, metrics.csv, last.ckpt and profile.txt" \
  test -f "$D/empty/config.ini" -a -f "$D/empty/metrics.csv" -a -f "$D/empty/checkpoints/last.ckpt" \
  -a -f "$D/empty/profile.txt"
expect 0 "trained 3 steps" "train --out MISSING/A/B: made, with its parents" \
  -- train "$T/rosen.ini" --out "$D/missing/a/b"

# ---- a run directory's files: never written through a link ----
# Resumed in place, a run rewrites profile.txt and appends to metrics.csv.
cp "$D/empty/profile.txt" "$D/secret" && chmod 600 "$D/secret" && cp -p "$D/secret" "$D/secret.copy"
ln -sf "$D/secret" "$D/empty/profile.txt"
"$LOOPKIT" train --resume "$D/empty/checkpoints/last.ckpt" --set loop.max_steps=6 --quiet >"$T/out" 2>&1
status=$?
check "resume with profile.txt a link: the run fails, naming the link" \
  sh -c "[ $status -ne 0 ] && grep -q 'profile $D/empty/profile.txt is a symbolic link' '$T/out'"
check "resume with profile.txt a link: the file it leads to untouched" same "$D/secret" "$D/secret.copy"
check "... and the link still a link" test -L "$D/empty/profile.txt"
expect 0 "trained 3 steps" "a second run for metrics.csv" -- train "$T/rosen.ini" --out "$D/m"
cp "$D/m/metrics.csv" "$D/rows" && cp "$D/rows" "$D/rows.copy"
ln -sf "$D/rows" "$D/m/metrics.csv"
expect 2 "metrics $D/m/metrics.csv is a symbolic link" \
  "resume with metrics.csv a link (to a copy of it): status 2, named" \
  -- train --resume "$D/m/checkpoints/last.ckpt" --set loop.max_steps=6
check "resume with metrics.csv a link: nothing appended where it leads" same "$D/rows" "$D/rows.copy"

# The tensorboard logger cuts its event file back to the checkpoint's
# length when a run is resumed in place: never through a link.
sed 's/^profiler = simple$/loggers = tensorboard/' "$T/rosen.ini" >"$T/tb.ini"
expect 0 "trained 3 steps" "a run with the tensorboard logger" -- train "$T/tb.ini" --out "$D/tb"
ev=$(ls "$D/tb"/events.out.tfevents.*)
cp "$ev" "$D/events" && cp "$D/events" "$D/events.copy" && ln -sf "$D/events" "$ev"
"$LOOPKIT" train --resume "$D/tb" --set loop.max_steps=6 --quiet >"$T/out" 2>&1
check "resume with the event file a link: fails, naming it" \
  sh -c "[ $? -ne 0 ] && grep -q 'cannot cut $ev back to' '$T/out'"
check "... and neither cuts nor appends to the file it leads to" same "$D/events" "$D/events.copy"

# ---- a killed run's temporary files, old and new names, are removed ----
: >"$D/m/config.ini.tmp-4242"
: >"$D/m/checkpoints/last.ckpt.tmp-aB3dE9"
rm "$D/m/metrics.csv" && cp "$D/rows" "$D/m/metrics.csv"
expect 0 "trained 6 steps" "resume in place after a kill" \
  -- train --resume "$D/m/checkpoints/last.ckpt" --set loop.max_steps=6
check "... removes NAME.tmp-PID and NAME.tmp-XXXXXX" \
  test ! -e "$D/m/config.ini.tmp-4242" -a ! -e "$D/m/checkpoints/last.ckpt.tmp-aB3dE9"

# ---- no name a file is written under can be predicted ----
# Every temporary file is made by src/base/outfile.c: no pid in a file name,
# no rename, mkstemp or fopen for writing anywhere else.
bad=$(cd "$LK_SRCDIR" && grep -n -e 'tmp-%' -e 'getpid()' src/*/*.c plugins/*/*.c plugins/*/*/*.c |
  grep -v -e 'plugins/profiler/trace.c:.*t->pid = ' -e 'src/loop/rundir.c:.*"%ld\\n", (long)getpid()')
check "no file name made from a pid${bad:+: $bad}" test -z "$bad"
bad=$(cd "$LK_SRCDIR" && grep -lE -e 'rename\(' -e 'mkstemp' -e 'mktemp\(' -e 'tmpnam' \
  -e 'fopen\([^)]*"[wa][b+]*"\)' src/*/*.c plugins/*/*.c plugins/*/*/*.c | grep -v '^src/base/outfile.c$')
check "rename, mkstemp and fopen for writing only in src/base/outfile.c${bad:+: $bad}" test -z "$bad"

# ---- links planted by another user under predictable names ----
# As root, in a sticky world-writable directory like /tmp, uid 65534
# plants links to a root-owned 0600 file under the names loopkit's
# temporaries had (OUT.tmp-PID; config.ini.tmp-PID and
# metrics.csv.tmp-PID in a run directory others may write) for the next
# 2000 pids, just before each command: predict used to truncate the file
# through one. Root then steers the next pid to the first of them
# (ns_last_pid); where it cannot, other processes may take those pids
# first, and an old loopkit may miss the links: the test passes either
# way on a loopkit that predicts no name.
if [ $root != yes ]; then
  skip "links planted by another user" "not root"
elif ! command -v setpriv >/dev/null 2>&1 || ! command -v perl >/dev/null 2>&1; then
  skip "links planted by another user" "no setpriv or no perl"
else
  P=$T/pub
  mkdir "$P" "$P/run" && chmod 1777 "$P" "$P/run" && chmod 711 "$T"
  printf 'root only\n' >"$T/victim" && chmod 600 "$T/victim" && cp -p "$T/victim" "$T/victim.copy"
  max=$(cat /proc/sys/kernel/pid_max 2>/dev/null || echo 32768)
  # plant NAME...: the links, for the pids after the last one given.
  plant() {
    last=$(cat /proc/sys/kernel/ns_last_pid 2>/dev/null || echo $$)
    setpriv --reuid=65534 --regid=65534 --clear-groups perl -e '
      my ($victim, $last, $max, @names) = @ARGV;
      for my $i (1 .. 2000) {
        my $p = $last + $i;
        $p = $p - $max + 300 if $p >= $max;
        symlink $victim, "$_.tmp-$p" for @names;
      }' "$T/victim" "$last" "$max" "$@"
    echo "$last" 2>/dev/null >/proc/sys/kernel/ns_last_pid
  }
  plant "$P/pred.csv"
  "$LOOPKIT" predict "$T/cls.ini" --ckpt "$CK" -o "$P/pred.csv" >"$T/out" 2>&1
  check "planted links: predict -o writes the predictions" same "$P/pred.csv" "$T/ref.predict"
  plant "$P/x.safetensors"
  "$LOOPKIT" export "$CK" -o "$P/x.safetensors" >"$T/out" 2>&1
  check "planted links: export -o writes the file" same "$P/x.safetensors" "$T/ref.export"
  if [ "${LK_HAVE_CAIRO:-no}" = yes ]; then
    plant "$P/c.png"
    "$LOOPKIT" plot "$R" -o "$P/c.png" >"$T/out" 2>&1
    check "planted links: plot -o draws the file" same "$P/c.png" "$T/ref.plot"
  fi
  plant "$P/run/config.ini" "$P/run/metrics.csv"
  expect 0 "trained 3 steps" "planted links: train --out a directory others may write" \
    -- train "$T/rosen.ini" --out "$P/run"
  check "planted links: its config.ini and metrics.csv are files of its own" \
    test -f "$P/run/config.ini" -a ! -L "$P/run/config.ini" -a -f "$P/run/metrics.csv" -a ! -L "$P/run/metrics.csv"
  check "uid 65534 planted its links" \
    test "$(find "$P" -type l -user 65534 | wc -l)" -ge 8000
  check "planted links: root's 0600 file untouched" same "$T/victim" "$T/victim.copy"
fi

finish

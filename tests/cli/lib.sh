# Shared by the CLI tests: TAP output and helpers to run the command.
# Each test script sources this, runs checks, and ends with finish.
set -u
# Tests that run make start it afresh: the suite's jobserver is not theirs
# (its file descriptors are closed), and make would warn about it.
unset MAKEFLAGS MFLAGS MAKELEVEL
: "${LOOPKIT:?LOOPKIT must name the loopkit binary (set by make check)}"
: "${LK_SRCDIR:?}"
T=$(mktemp -d "${TMPDIR:-/tmp}/lk-cli.XXXXXX")
trap 'rm -rf "$T"' EXIT
n=0
failed=0

ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
  n=$((n + 1))
  failed=$((failed + 1))
  echo "not ok $n - $1"
  shift
  for line in "$@"; do echo "#   $line"; done
}

# check DESC COMMAND...: passes when COMMAND succeeds.
check() {
  desc=$1
  shift
  if "$@"; then ok "$desc"; else not_ok "$desc" "failed: $*"; fi
}

# expect STATUS PATTERN DESC -- ARGS...: runs loopkit ARGS; passes when it
# exits with STATUS and its output (stdout and stderr) matches the
# extended regular expression PATTERN.
expect() {
  status=$1 pattern=$2 desc=$3
  shift 4
  "$LOOPKIT" "$@" >"$T/out" 2>&1
  got=$?
  if [ "$got" -ne "$status" ]; then
    not_ok "$desc" "exit status $got, expected $status" "$(head -c 2000 "$T/out")"
  elif ! grep -Eq -- "$pattern" "$T/out"; then
    not_ok "$desc" "output does not match /$pattern/:" "$(head -c 2000 "$T/out")"
  else
    ok "$desc"
  fi
}

# config NAME <<EOF ... EOF: writes $T/NAME.ini from standard input.
config() { cat >"$T/$1.ini"; }

# value NAME[I] CKPT: prints that parameter's value from loopkit dump.
value() { "$LOOPKIT" dump "$2" | awk -v k="$1" '$1 == k { print $2 }'; }

# count PATTERN FILE: lines of FILE equal to PATTERN.
count() { grep -cx -- "$1" "$2" || true; }

finish() {
  echo "1..$n"
  [ "$failed" -eq 0 ]
}

#!/bin/sh
# The shape of src/ (docs/architecture.md): no two files of the library
# depend on each other in a circle, read from the objects' symbols (a file
# depends on the one that defines an lk_ symbol it uses), and no function
# of the loop is longer than a screen.
. "$LK_SRCDIR/tests/cli/lib.sh"
: "${LK_BUILDDIR:?}"
objs=$(ls "$LK_BUILDDIR"/src/.libs/libloopkit_la-*.o 2>/dev/null)
if [ -z "$objs" ] || ! command -v nm >/dev/null 2>&1; then
  echo "ok 1 # SKIP no library objects or no nm"
  echo "1..1"
  exit 0
fi
file_of() { f=${1##*/libloopkit_la-}; echo "${f%.o}"; }
: >"$T/defs"
: >"$T/uses"
for o in $objs; do
  f=$(file_of "$o")
  nm -g --defined-only "$o" | awk -v f="$f" '$3 ~ /^lk_/ { print $3, f }' >>"$T/defs"
  nm -u "$o" | awk -v f="$f" '$2 ~ /^lk_/ { print $2, f }' >>"$T/uses"
done
sort -o "$T/defs" "$T/defs"
sort -o "$T/uses" "$T/uses"
# "USER DEFINER" for every use across files
join "$T/uses" "$T/defs" | awk '$2 != $3 { print $2, $3 }' | sort -u >"$T/edges"
check "the library's files have dependencies between them ($(wc -l <"$T/edges") edges)" \
  test -s "$T/edges"
tsort "$T/edges" >/dev/null 2>"$T/loop"
check "no two files of src/ depend on each other in a circle" test ! -s "$T/loop"
[ -s "$T/loop" ] && sed 's/^/# /' "$T/loop"
# The loop's dependencies point down, never back to setup or the host API.
check "loop.c depends on neither setup.c nor host.c" \
  sh -c "! grep -Eq '^loop (setup|host|run)$' '$T/edges'"
check "hooks.c depends only on the registry and the kinds" \
  sh -c "awk '\$1 == \"hooks\" { print \$2 }' '$T/edges' | grep -Evx 'registry|kinds|error' | grep -q . && exit 1 || exit 0"

# No function of the loop longer than a screen (60 lines).
awk '/^[a-z].*\) \{$/ { name = $0; start = NR }
     /^\}$/ && start { if (NR - start > 60) print name " (" NR - start " lines)"; start = 0 }' \
  "$LK_SRCDIR/src/loop/loop.c" >"$T/long"
check "no function in src/loop/loop.c is longer than 60 lines" test ! -s "$T/long"
[ -s "$T/long" ] && sed 's/^/# /' "$T/long"
finish

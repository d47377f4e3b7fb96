#!/bin/sh
# The shape of src/ and plugins/ (docs/architecture.md):
# - src/ is made of parts, a folder each, ranked in src/PARTS: no object of
#   a part uses a symbol defined by a later part, and no file includes a
#   later part's header;
# - no two files of the library depend on each other in a circle, nor two
#   files of the command (a file depends on the one that defines a symbol
#   it uses, read from the objects' symbols);
# - every plugin source sits in the folder of a kind it declares, or in
#   plugins/lib, which holds no plugin;
# - no function of the loop is longer than a screen, none of src/ longer
#   than 80 lines nor of plugins/ than 100, and no multi-line macro that
#   generates code longer than 30.
# Each check is first shown a made-up violation it must report.
. "$LK_SRCDIR/tests/cli/lib.sh"
: "${LK_BUILDDIR:?}"
S=$LK_SRCDIR

# ---- the parts and their ranks ----------------------------------------------

sed -e 's/#.*//' "$S/src/PARTS" | awk 'NF { print $1, ++r }' >"$T/ranks"
check "src/PARTS ranks the parts ($(awk '{ printf "%s%s", s, $1; s = " < " }' "$T/ranks"))" \
  test -s "$T/ranks"
(cd "$S/src" && ls -d -- */ | tr -d / | sort) >"$T/folders"
cut -d' ' -f1 "$T/ranks" | sort >"$T/parts"
check "every folder of src/ is a part of src/PARTS, and every part a folder" \
  cmp -s "$T/folders" "$T/parts"
(cd "$S/src" && ls -- *.c *.h 2>/dev/null) >"$T/loose"
check "no source file of src/ stands outside a part's folder" test ! -s "$T/loose"
[ -s "$T/loose" ] && sed 's/^/# /' "$T/loose"
# The same order in the map: its folder tree names each part as src/PART/.
grep -o '^| `src/[a-z_]*/`' "$S/docs/architecture.md" | sed 's/.*src\/\([a-z_]*\)\/`/\1/' \
  >"$T/doc_parts"
check "docs/architecture.md lists the parts in the order of src/PARTS" \
  sh -c "cut -d' ' -f1 '$T/ranks' | cmp -s - '$T/doc_parts'"

# The tree at the top of the map: one line per folder, two spaces of
# indent per level. tree_dirs DOC SRC: the folders under src/ and plugins/
# that SRC has and DOC's tree lacks ("missing"), or that it names and SRC
# has not ("stale").
tree_dirs() {
  awk '/^The tree, one line per folder/ { seen = 1 }
       /^```/ { if (inblock) exit; if (seen) inblock = 1; next }
       inblock { match($0, /^ */); d = RLENGTH / 2; path[d] = $1; p = ""
                 for (i = 0; i <= d; i++) p = p path[i]
                 if (p ~ /^(src|plugins)\/./) { sub(/\/$/, "", p); print p } }' \
    "$1" | sort >"$T/tree_doc"
  (cd "$2" && find src plugins -mindepth 1 -type d ! -name '.*' | sort) >"$T/tree_src"
  comm -13 "$T/tree_doc" "$T/tree_src" | sed 's/^/missing /'
  comm -23 "$T/tree_doc" "$T/tree_src" | sed 's/^/stale /'
}
tree_dirs "$S/docs/architecture.md" "$S" >"$T/tree_diff"
check "docs/architecture.md's tree names every folder of src/ and plugins/ ($(wc -l <"$T/tree_src") of them), and no other" \
  test ! -s "$T/tree_diff"
[ -s "$T/tree_diff" ] && sed 's/^/# /' "$T/tree_diff"
mkdir -p "$T/fake_tree/src/base" "$T/fake_tree/plugins/model/sequential"
printf 'The tree, one line per folder\n```\nsrc/\n  base/ x\n  nn/ y\nplugins/\n  model/ z\n```\n' \
  >"$T/fake_tree.md"
tree_dirs "$T/fake_tree.md" "$T/fake_tree" >"$T/fake_tree_diff"
check "... and reports a folder it lacks and one it names in vain" \
  sh -c "grep -qx 'missing plugins/model/sequential' '$T/fake_tree_diff' &&
    grep -qx 'stale src/nn' '$T/fake_tree_diff'"

# upward EDGES: the lines "USER DEFINER WHAT" of EDGES (files named
# PART/FILE) whose user is of a lower part than what it uses.
upward() {
  awk 'NR == FNR { rank[$1] = $2; next }
       { u = $1; d = $2; sub(/\/.*/, "", u); sub(/\/.*/, "", d)
         if (!(u in rank) || !(d in rank) || rank[u] < rank[d])
           print $1 " (" u ") uses " $3 " of " $2 " (" d ")" }' "$T/ranks" "$1"
}
echo "base/util loop/loop lk__train_epoch" >"$T/bad_edge"
upward "$T/bad_edge" >"$T/bad_up"
check "the order check reports a call from a lower part to a higher one" \
  grep -q 'base/util (base) uses lk__train_epoch of loop/loop (loop)' "$T/bad_up"

# ---- #include lines: no header of a later part ------------------------------

# includes DIR: "FILE HEADER include" for every #include "..." of DIR/src
# that names a header of src/: by its path from the file (../base/...), or
# by name, as every part's folder is on the include path (and no two
# headers share a name, checked below).
includes() {
  (cd "$1/src" && ls -- */*.h | awk -F/ '{ print $2, $0 }' >"$T/headers" &&
    awk 'NR == FNR { by_name[$1] = $2; next }
         /^[ \t]*#[ \t]*include[ \t]*"/ {
           h = $0; sub(/^[^"]*"/, "", h); sub(/".*/, "", h)
           if (h ~ /^\.\.\//) print FILENAME, substr(h, 4), "include"
           else if (h in by_name) print FILENAME, by_name[h], "include"
         }' "$T/headers" */*.c */*.h)
}
includes "$S" >"$T/includes"
check "the include check reads the #include lines of src/ ($(wc -l <"$T/includes") of them)" \
  test -s "$T/includes"
upward "$T/includes" >"$T/inc_up"
check "no file of src/ includes a header of a later part" test ! -s "$T/inc_up"
[ -s "$T/inc_up" ] && sed 's/^/# /' "$T/inc_up"
mkdir -p "$T/fake/src/base" "$T/fake/src/loop"
echo '#include "loop.h"' >"$T/fake/src/base/util.c"
: >"$T/fake/src/loop/loop.h"
includes "$T/fake" | upward /dev/stdin >"$T/fake_up"
check "... and reports a base file that includes the loop's header" \
  grep -q '^base/util.c (base) uses include of loop/loop.h (loop)' "$T/fake_up"
# Headers are found by name from every part: no two may share one.
(cd "$S/src" && ls -- */*.h | sed 's/.*\///' | sort | uniq -d) >"$T/dup_h"
check "no two parts have a header of the same name" test ! -s "$T/dup_h"
[ -s "$T/dup_h" ] && sed 's/^/# /' "$T/dup_h"

# ---- plugins/: a folder per kind ------------------------------------------

kinds=$(sed -n 's/^  X([A-Z_]*, \([a-z_]*\), .*/\1/p' "$S/src/plugin/kinds.h" | tr '\n' ' ')
# misplaced DIR: every plugin source of DIR/plugins not in the folder of a
# kind it declares (model/ holds the step plugins). A source declares the
# kinds its descriptor points to (.optimizer = &...), whose ops it defines
# (lk_scheduler_ops NAME = ...), and whose descriptor it makes with
# plugins/lib's macros of that kind (BUNDLED_OPTIMIZER(...),
# BUNDLED_SCHEDULER_OF(...)); a
# file of a plugin's own folder (plugins/data/npy/) counts what the
# folder's files declare.
misplaced() {
  (cd "$1/plugins" && find . -name '*.[ch]' | sed 's/^\.\///' | sort |
    while read -r f; do
      case $f in
      lib/*)
        # (a macro's line, which a plugin expands, is not a plugin)
        grep -v '\\$' "$f" | grep -q 'lk_plugin_descriptor *=' &&
          echo "$f: a plugin in plugins/lib, which holds what plugins share"
        continue
        ;;
      */*) ;;
      *)
        echo "$f: not in a kind's folder"
        continue
        ;;
      esac
      k=${f%%/*}
      want=$k
      [ "$k" = model ] && want=step
      case " $kinds " in
      *" $want "*) ;;
      *)
        echo "$f: $k/ is not a kind of src/plugin/kinds.h (nor model/)"
        continue
        ;;
      esac
      rest=${f#*/}
      case $rest in
      */*) unit=$k/${rest%%/*} ;;
      *.h) echo "$f: a header outside plugins/lib and a plugin's folder"; continue ;;
      *) unit=$f ;;
      esac
      # shellcheck disable=SC2046
      macro=BUNDLED_$(echo "$want" | tr '[:lower:]' '[:upper:]')
      grep -Eqs "\.$want *= *&|lk_${want}_ops [A-Za-z0-9_]+ *=|$macro[A-Z_]* *\(" \
        /dev/null $(find "$unit" -name '*.c') ||
        echo "$f: in $k/, but declares no $want"
    done)
}
misplaced "$S" >"$T/misplaced"
check "every plugin source is in its kind's folder or plugins/lib ($(cd "$S/plugins" && find . -name '*.c' | wc -l) sources)" \
  test ! -s "$T/misplaced"
[ -s "$T/misplaced" ] && sed 's/^/# /' "$T/misplaced"
mkdir -p "$T/fake/plugins/optimizer" "$T/fake/plugins/lib"
echo 'static const lk_scheduler_ops scheduler_ops = {0};' >"$T/fake/plugins/optimizer/cosine.c"
echo 'const lk_descriptor lk_plugin_descriptor = {0};' >"$T/fake/plugins/lib/shared.c"
echo 'int x;' >"$T/fake/plugins/loose.c"
mkdir -p "$T/fake/plugins/scheduler"
echo 'const lk_descriptor d = BUNDLED_SCHEDULER("step", "", f, NULL, &ops);' \
  >"$T/fake/plugins/optimizer/step.c"
echo 'const lk_descriptor d = BUNDLED_SCHEDULER("step", "", f, NULL, &ops);' \
  >"$T/fake/plugins/scheduler/step.c"
misplaced "$T/fake" >"$T/fake_misplaced"
check "... and reports a scheduler among the optimizers, a plugin in lib/, a loose source" \
  sh -c "grep -q '^optimizer/cosine.c: in optimizer/, but declares no optimizer' '$T/fake_misplaced' &&
    grep -q '^lib/shared.c: a plugin' '$T/fake_misplaced' &&
    grep -q '^loose.c: not in a kind' '$T/fake_misplaced'"
check "... and reads the kind of a descriptor made with bundled.h's macro" \
  sh -c "grep -q '^optimizer/step.c: in optimizer/, but declares no optimizer' '$T/fake_misplaced' &&
    ! grep -q '^scheduler/step.c' '$T/fake_misplaced'"

# unbuilt DIR: every .c of a plugin's own folder (plugins/KIND/NAME/) that
# Makefile.am does not build into NAME.so. A plugin given a folder is made
# of all its files; fuzz/run builds it that way, so a file left out of one
# or the other is a plugin built two ways.
unbuilt() {
  (cd "$1" && find plugins -mindepth 3 -name '*.c' | sort |
    while read -r f; do
      name=$(basename "$(dirname "$f")")
      awk -v v="plugins_${name}_la_SOURCES" -v f="$f" '
        $1 == v { on = 1 }
        on { for (i = 1; i <= NF; i++) if ($i == f) found = 1
             if ($NF != "\\") on = 0 }
        END { exit !found }' Makefile.am || echo "$f: not in plugins_${name}_la_SOURCES"
    done)
}
unbuilt "$S" >"$T/unbuilt"
check "every source of a plugin's folder is built into it ($(cd "$S" && find plugins -mindepth 3 -name '*.c' | wc -l) sources)" \
  test ! -s "$T/unbuilt"
[ -s "$T/unbuilt" ] && sed 's/^/# /' "$T/unbuilt"
mkdir -p "$T/fake2/plugins/model/seq"
printf 'plugins_seq_la_SOURCES = plugins/model/seq/seq.c \\\n\tplugins/model/seq/a.h\n' >"$T/fake2/Makefile.am"
touch "$T/fake2/plugins/model/seq/seq.c" "$T/fake2/plugins/model/seq/loss.c"
unbuilt "$T/fake2" >"$T/fake_unbuilt"
check "... and reports a file of the folder that is not built" \
  sh -c "grep -q '^plugins/model/seq/loss.c: not in' '$T/fake_unbuilt' && ! grep -q 'seq/seq.c' '$T/fake_unbuilt'"

# ---- the objects' symbols ---------------------------------------------------

# The library's objects (libtool's, in src/PART/.libs), the layer kit's
# with them, and the command's (src/cli).
lib_objs=$(ls "$LK_BUILDDIR"/src/*/.libs/*.o 2>/dev/null)
cli_objs=$(ls "$LK_BUILDDIR"/src/cli/loopkit-*.o 2>/dev/null)
if [ -z "$lib_objs" ] || [ -z "$cli_objs" ] || ! command -v nm >/dev/null 2>&1; then
  echo "# SKIP the objects' checks: no objects in $LK_BUILDDIR/src or no nm"
  finish
  exit $?
fi
# symbols LABEL OBJECT: OBJECT's defined and used symbols, as "SYMBOL LABEL"
symbols() {
  nm -g --defined-only "$2" | awk -v f="$1" '$3 ~ /^[A-Za-z]/ { print $3, f }' >>"$T/defs"
  nm -u "$2" | awk -v f="$1" '$NF ~ /^[A-Za-z]/ { print $NF, f }' >>"$T/uses"
}
: >"$T/defs"
: >"$T/uses"
for o in $lib_objs; do
  p=${o%/.libs/*}
  f=${o##*/}
  f=${f#*_la-}
  symbols "${p##*/}/${f%.o}" "$o"
done
for o in $cli_objs; do
  f=${o##*/loopkit-}
  symbols "cli/${f%.o}" "$o"
done
sort -o "$T/defs" "$T/defs"
sort -o "$T/uses" "$T/uses"
# "USER DEFINER SYMBOL" for every use across files
join "$T/uses" "$T/defs" | awk '$2 != $3 { print $2, $3, $1 }' | sort -u >"$T/uses_of"
awk '{ print $1, $2 }' "$T/uses_of" | sort -u >"$T/edges"
grep -v '^cli/' "$T/edges" >"$T/lib_edges"
grep '^cli/[^ ]* cli/' "$T/edges" >"$T/cli_edges"
check "the library's files have dependencies between them ($(wc -l <"$T/lib_edges") edges)" \
  test -s "$T/lib_edges"
check "so do the command's ($(wc -l <"$T/cli_edges") edges)" test -s "$T/cli_edges"

upward "$T/uses_of" >"$T/up"
check "no object of a part uses a symbol of a later part (src/PARTS)" test ! -s "$T/up"
[ -s "$T/up" ] && sed 's/^/# /' "$T/up"

tsort "$T/lib_edges" >/dev/null 2>"$T/loop"
check "no two files of the library depend on each other in a circle" test ! -s "$T/loop"
[ -s "$T/loop" ] && sed 's/^/# /' "$T/loop"
tsort "$T/cli_edges" >/dev/null 2>"$T/cli_loop"
check "no two files of the command depend on each other in a circle" test ! -s "$T/cli_loop"
[ -s "$T/cli_loop" ] && sed 's/^/# /' "$T/cli_loop"
printf 'cli/a cli/b\ncli/b cli/a\n' | tsort >/dev/null 2>"$T/fake_loop"
check "... (tsort reports a circle)" test -s "$T/fake_loop"

# The loop's dependencies point down, never back to setup or the host API.
check "loop.c depends on neither setup.c nor host.c" \
  sh -c "! grep -Eq '^loop/loop (run/setup|api/host|run/run)$' '$T/edges'"
check "hooks.c depends only on the registry and the kinds" \
  sh -c "awk '\$1 == \"plugin/hooks\" { print \$2 }' '$T/edges' | grep -Evx 'plugin/registry|plugin/kinds|base/error' | grep -q . && exit 1 || exit 0"

# ---- the loop reads like a loop ---------------------------------------------

# No function of the loop longer than a screen (60 lines).
awk '/^[a-z].*\) \{$/ { name = $0; start = NR }
     /^\}$/ && start { if (NR - start > 60) print name " (" NR - start " lines)"; start = 0 }' \
  "$S/src/loop/loop.c" >"$T/long"
check "no function in src/loop/loop.c is longer than 60 lines" test ! -s "$T/long"
[ -s "$T/long" ] && sed 's/^/# /' "$T/long"

# ---- functions and macros of a readable length ---------------------------

cat >"$T/lens.awk" <<'AWK'
# "FILE:LINE NAME (N lines)" for every function longer than LIMIT lines
# (its signature to its closing brace) and every multi-line #define longer
# than MACRO lines that generates code (has a ';' in its body).
function report(what, start, n) { print FILENAME ":" start " " what " (" n " lines)" }
FNR == 1 { run = 0; start = 0; mstart = 0 }
mstart {
  s = $0; gsub(/"([^"\\]|\\.)*"/, "", s); if (s ~ /;/) mcode = 1
  if ($0 !~ /\\$/) {
    if (NR - mstart + 1 > macro && mcode) report(mname, FNR - (NR - mstart), NR - mstart + 1)
    mstart = 0
  }
  next
}
/^[ \t]*#[ \t]*define[ \t].*\\$/ {
  mstart = NR; mcode = 0; mname = $0; sub(/^[ \t]*#[ \t]*define[ \t]+/, "", mname); sub(/[( \t].*/, "", mname)
  next
}
!start && /\)[ \t]*\{[ \t]*$/ && ($0 ~ /^[A-Za-z_]/ || (run && prev[0] ~ /^[A-Za-z_]/)) {
  start = FNR - run; name = ""
  for (i = 0; i < run; i++) name = name prev[i] " "
  name = name $0
  sub(/\(.*/, "", name); sub(/.*[ *]/, "", name)
}
start && /^\}/ { if (FNR - start + 1 > limit) report(name "()", start, FNR - start + 1); start = 0 }
{
  if ($0 == "" || $0 ~ /^[#}\/]/ || $0 ~ /^ \*/ || $0 ~ /[;{]$/ || $0 ~ /\*\/$/) run = 0
  else prev[run++] = $0
}
AWK
# lengths LIMIT FILE...: what in the files is longer than it may be.
lengths() {
  lim=$1
  shift
  awk -v limit="$lim" -v macro=30 -f "$T/lens.awk" "$@"
}
# shellcheck disable=SC2046
(cd "$S" && lengths 80 $(find src -name '*.[ch]' | sort)) >"$T/long_src"
check "no function in src/ is longer than 80 lines, nor a code-making macro than 30" \
  test ! -s "$T/long_src"
[ -s "$T/long_src" ] && sed 's/^/# /' "$T/long_src"
# shellcheck disable=SC2046
(cd "$S" && lengths 100 $(find plugins -name '*.[ch]' | sort)) >"$T/long_plugins"
check "no function in plugins/ is longer than 100 lines, nor a code-making macro than 30" \
  test ! -s "$T/long_plugins"
[ -s "$T/long_plugins" ] && sed 's/^/# /' "$T/long_plugins"
{
  printf 'static int\nlong_one(int a,\n         int b) {\n'
  i=0
  while [ $i -lt 79 ]; do echo '  a++;'; i=$((i + 1)); done
  printf '  return a + b;\n}\n#define TABLE(X) \\\n'
  i=0
  while [ $i -lt 40 ]; do echo '  X(a, "b; c") \'; i=$((i + 1)); done
  printf '  X(z, "")\n#define GEN(t) \\\n'
  i=0
  while [ $i -lt 30 ]; do echo '  t x; \'; i=$((i + 1)); done
  printf '  t y;\nint short_one(void) {\n  return 0;\n}\n'
} >"$T/fake_long.c"
lengths 80 "$T/fake_long.c" >"$T/fake_long"
check "... and reports a made-up 84-line function and 32-line code macro, not a long table of data" \
  sh -c "grep -q 'fake_long.c:1 long_one() (84 lines)' '$T/fake_long' &&
    grep -q 'fake_long.c:[0-9]* GEN (32 lines)' '$T/fake_long' && [ \$(wc -l <'$T/fake_long') -eq 2 ]"
finish

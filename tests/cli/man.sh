#!/bin/sh
# The manual pages: each renders without a warning, and what they say
# agrees with the program: loopkit.ini(5)'s plugin sections with loopkit
# inspect of every bundled plugin, its [loop] keys and defaults with a
# run's effective config.ini, its [plugins] roles with what a config may
# name; loopkit(1) with loopkit --help; loopkit-plugin(7) with the headers.
. "$LK_SRCDIR/tests/cli/lib.sh"
: "${LK_BUILDDIR:?}"
M=$LK_BUILDDIR/man
P7=$LK_SRCDIR/man/loopkit-plugin.7

# unroff: roff escapes back to text, font changes dropped.
unroff() { sed -e 's/\\f[BIRP]//g' -e 's/\\-/-/g' -e 's/\\e/\\/g' -e 's/\\&//g'; }

if command -v groff >/dev/null 2>&1; then
  for page in "$M/loopkit.1" "$M/loopkit.ini.5" "$P7"; do
    groff -man -ww -z "$page" >"$T/groff" 2>&1
    st=$?
    check "$(basename "$page") renders without warnings" \
      sh -c "[ $st -eq 0 ] && [ ! -s '$T/groff' ]"
    [ -s "$T/groff" ] && sed 's/^/#   /' "$T/groff" | head -5
  done
else
  for page in loopkit.1 loopkit.ini.5 loopkit-plugin.7; do
    echo "ok $((n += 1)) - $page renders # SKIP groff not installed (Debian: groff-base)"
  done
fi

# man -l on the source tree's templates is no trap: they say they are
# templates and name the built page, which does not.
for page in loopkit.1 loopkit.ini.5; do
  if command -v groff >/dev/null 2>&1; then
    groff -man -Tutf8 "$LK_SRCDIR/man/$page.in" 2>/dev/null | col -b 2>/dev/null >"$T/tmpl" ||
      groff -man -Tascii "$LK_SRCDIR/man/$page.in" >"$T/tmpl" 2>/dev/null
    check "man -l man/$page.in says it is a template and names build/man/$page" \
      sh -c "grep -q 'THIS IS A TEMPLATE' '$T/tmpl' && grep -q 'build/man/$page' '$T/tmpl'"
  else
    echo "ok $((n += 1)) - man/$page.in names the built page # SKIP groff not installed"
  fi
  check "... and build/man/$page does not" sh -c "! grep -q 'TEMPLATE' '$M/$page'"
done

# ---- loopkit.ini(5) against loopkit inspect ----
# entries FILE: "name (type, default D)" lines of a roff option list.
entries() { grep '^\\fB' "$1" | unroff; }

# The options of plugin section [NAME] of loopkit.ini(5).
man_section() {
  awk -v s=".SS [$1]" '$0 == s { on = 1; next } /^\.S[SH]/ { on = 0 } on' \
    "$M/loopkit.ini.5" >"$T/sec"
  entries "$T/sec"
}

# The same, from loopkit inspect.
inspect_options() {
  "$LOOPKIT" inspect "$1" | awk '
    /^options:/ { on = 1; next }
    /^[^ ]/ { on = 0 } # the host keys after them are loopkit.ini(5)'"'"'s own
    on && /^  [^ ]/ {
      def = $0; sub(/^.* default ?/, "", def)
      if (def == "(required)") d = "no default"
      else if (def == "") d = "default \"\""
      else d = "default " def
      # The type, and a number'"'"'s range after it: "double [0, inf)".
      type = $0; sub(/^  [^ ]+ +/, "", type); sub(/ +default.*$/, "", type)
      if (type ~ / /) { range = type; sub(/^[^ ]+ /, "", range); sub(/ .*/, "", type); type = type " in " range }
      print $1 " (" type ", " d ")"
    }'
}

plugins=0
bad=
for so in "$LK_BUILDDIR"/plugins/.libs/*.so; do
  name=$("$LOOPKIT" inspect "$so" | awk '/^name:/ { print $2 }')
  plugins=$((plugins + 1))
  inspect_options "$so" >"$T/a"
  rname=$(printf '%s' "$name" | sed 's/-/\\-/g') # roff's \- (bf16-mixed)
  man_section "$rname" >"$T/b"
  grep -qxF ".SS [$rname]" "$M/loopkit.ini.5" || bad="$bad $name(no section)"
  cmp -s "$T/a" "$T/b" || bad="$bad $name"
done
check "loopkit.ini(5) has every bundled plugin ($plugins) with the options inspect prints${bad:+:$bad}" \
  test -z "$bad"
check "... which is more than a handful" test "$plugins" -ge 20

# [loop]: names and defaults as the effective config of a run with none set
# (but max_steps, which rosenbrock needs, and max_epochs, which max_steps
# makes -1).
config defaults <<INI
[loop]
max_steps = 1
[plugins]
step = rosenbrock
optimizer = sgd
[sgd]
lr = 0.001
INI
"$LOOPKIT" train "$T/defaults.ini" --out "$T/run" --quiet >/dev/null 2>&1
awk '/^\[/ { on = ($0 == "[loop]"); next } on && NF { print $1 " " $3 }' \
  "$T/run/config.ini" | grep -v '^max_steps \|^max_epochs ' | sort >"$T/loop.run"
awk '$0 == ".SH \"[loop]\"" { on = 1; next } /^\.SH/ { on = 0 } on' \
  "$M/loopkit.ini.5" >"$T/sec"
entries "$T/sec" | sed 's/^\([a-z_]*\) (.*, default \(.*\))$/\1 \2/' |
  grep -v '^max_steps \|^max_epochs ' | sort >"$T/loop.man"
check "loopkit.ini(5)'s [loop] keys and defaults are the effective config's" \
  cmp "$T/loop.run" "$T/loop.man"
check "... all fifteen of them (max_steps and max_epochs apart)" test "$(wc -l <"$T/loop.man")" -eq 13
check "... and max_steps" grep -q '^\\fBmax_steps\\fR (int, default \\-1)' "$M/loopkit.ini.5"
check "... and max_epochs, 1 by default" grep -q '^\\fBmax_epochs\\fR (int, default 1)' "$M/loopkit.ini.5"
check "... but -1 (no limit) in a run that sets max_steps alone" grep -qx 'max_epochs = -1' "$T/run/config.ini"

# [plugins]: the roles the config checks accept.
config badrole <<INI
[plugins]
stepp = rosenbrock
INI
"$LOOPKIT" train "$T/badrole.ini" >"$T/out" 2>&1
sed -n 's/.*accepted: //p' "$T/out" | tr -d ' ' | tr ',' '\n' | sort >"$T/roles.run"
awk '$0 == ".SH \"[plugins]\"" { on = 1; next } /^\.SH/ { on = 0 } on' \
  "$M/loopkit.ini.5" >"$T/sec"
entries "$T/sec" | sed 's/ .*//' | sort >"$T/roles.man"
check "loopkit.ini(5)'s [plugins] roles are those a config may name" \
  sh -c "[ -s '$T/roles.run' ] && cmp '$T/roles.run' '$T/roles.man'"

# ---- loopkit(1) against loopkit --help ----
"$LOOPKIT" --help | awk '
  /^  loopkit [a-z]/ { cmd = $2; print cmd; next }
  /^      -/ && cmd { print cmd " " $1 }' >"$T/help"
awk '/^\.SS "loopkit / { cmd = $3; sub(/"$/, "", cmd); print cmd; next }
  /^\.S[SH]/ { cmd = "" }
  cmd && /^\\fB\\-/ { f = $1; gsub(/\\f[BR]/, "", f); gsub(/\\-/, "-", f); print cmd " " f }' \
  "$M/loopkit.1" >"$T/man1"
check "loopkit(1) has every command and option of loopkit --help" cmp "$T/help" "$T/man1"
check "... and --help lists them all (13 commands)" test "$(grep -vc ' ' "$T/help")" -eq 13

# ---- loopkit-plugin(7) against the headers ----
H=$LK_SRCDIR/include/loopkit
{
  sed -n 's/.*(\*\([a-z_]*\))(.*/\1/p' "$H/plugin.h"
  sed -n 's/^LK_API [^(]*[ *]\(lk_[a-z_0-9]*\)(.*/\1/p' "$H/host.h"
  awk '/^typedef struct lk_descriptor/ { on = 1; next } on && /^}/ { on = 0 }
    on && /;/ && !/\(/ { s = $0; sub(/;.*/, "", s); sub(/.*[ *]/, "", s); print s }' "$H/plugin.h"
} | sort -u >"$T/names"
missing=
while read -r name; do
  grep -q -e "\\\\fB$name\\\\f[RP]" -e "^\\.BR\\{0,1\\} $name\\( \\|\$\\)" "$P7" ||
    missing="$missing $name"
done <"$T/names"
check "loopkit-plugin(7) names every entry, host function and descriptor field ($(wc -l <"$T/names"))${missing:+; missing:$missing}" \
  test -z "$missing"
check "... of which there are many" test "$(wc -l <"$T/names")" -ge 60
# ---- section 3: a page per public function (scripts/man3.awk) ----
M3=$LK_BUILDDIR/man/man3
if command -v nm >/dev/null 2>&1 && [ -f "$LK_BUILDDIR/.libs/libloopkit.so" ]; then
  nm -D --defined-only "$LK_BUILDDIR/.libs/libloopkit.so" |
    awk '$2 == "T" && $3 ~ /^lk_/ { print $3 }' | sort >"$T/exported"
  ls "$M3" 2>/dev/null | sed -n 's/\.3$//p' | sort >"$T/pages"
  missing=$(comm -23 "$T/exported" "$T/pages" | tr '\n' ' ')
  extra=$(comm -13 "$T/exported" "$T/pages" | tr '\n' ' ')
  check "man3: a page for every function libloopkit exports ($(wc -l <"$T/exported"))${missing:+; missing: $missing}" \
    test -z "$missing"
  check "man3: ... and none for anything else${extra:+: $extra}" test -z "$extra"
  check "man3: ... which is more than a hundred" test "$(wc -l <"$T/exported")" -ge 100
else
  echo "ok $((n += 1)) - man3: a page for every exported function # SKIP no nm or no shared libloopkit"
fi
bad=
for page in "$M3"/*.3; do
  name=$(basename "$page" .3)
  awk -v n="$name" 'NR == 3 && index($0, n " \\- ") == 1 { ok = 1 } END { exit !ok }' "$page" || bad="$bad $name(NAME)"
  grep -q "^[A-Za-z_ ].*$name(" "$page" || bad="$bad $name(SYNOPSIS)"
  grep -q '^\.SH DESCRIPTION$' "$page" || bad="$bad $name(DESCRIPTION)"
done
check "man3: each page has NAME, the declaration and a description${bad:+:$bad}" test -z "$bad"
check "man3: lk_bind_n's page is its header comment" \
  grep -q '^number of arguments; prefer it, or the LK_BIND macro, which counts the$' "$M3/lk_bind_n.3"
if command -v groff >/dev/null 2>&1; then
  bad=
  for page in "$M3"/*.3; do
    groff -man -Tutf8 -ww -z "$page" >"$T/groff" 2>&1 && [ ! -s "$T/groff" ] ||
      bad="$bad $(basename "$page")"
  done
  check "man3: every page renders without warnings${bad:+:$bad}" test -z "$bad"
else
  echo "ok $((n += 1)) - man3 pages render # SKIP groff not installed"
fi
finish

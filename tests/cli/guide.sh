#!/bin/sh
# docs/writing-plugins.md: its code blocks are exactly the files of
# docs/guide/, and those build against an installed loopkit with pkg-config
# and do what the guide says: logreg passes gradcheck and learns, trials
# trains, resumes exactly (its rate is state) and obeys the NaN rule.
. "$LK_SRCDIR/tests/cli/lib.sh"
: "${LK_BUILDDIR:?}"
G=$LK_SRCDIR/docs/guide

for f in logreg.c trials.c Makefile logreg.ini trials.ini; do
  awk -v want="guide/$f" '
    /^<!-- file: / { take = ($3 == want); next }
    /^```/ { if (inb) { inb = 0; take = 0; next } if (take) { if (n++) print ""; inb = 1; next } }
    inb { print }' "$LK_SRCDIR/docs/writing-plugins.md" >"$T/block"
  check "the guide's $f is docs/guide/$f" cmp -s "$T/block" "$G/$f"
done

make -s -C "$LK_BUILDDIR" install DESTDIR="$T/root" >"$T/install.log" 2>&1
check "make install into a staging directory" test $? -eq 0
pc=$LK_BUILDDIR/loopkit.pc
libdir=$(pkg-config --variable=libdir "$pc")
bin=$T/root$(pkg-config --variable=exec_prefix "$pc")/bin/loopkit
pluginsdir=$(pkg-config --variable=pluginsdir "$pc")
cp -R "$G" "$T/guide" && chmod -R u+w,go-w "$T/guide"
PKG_CONFIG_PATH="$T/root$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$T/root" \
  make -s -C "$T/guide" CFLAGS="-O2 -Wall -Wextra -Werror" >"$T/build.log" 2>&1
check "the guide's plugins build with pkg-config loopkit, warning-free" \
  sh -c "test -f '$T/guide/logreg.so' && test -f '$T/guide/trials.so'"

lk() {
  (cd "$T/guide" && LD_LIBRARY_PATH="$T/root$libdir" \
    LOOPKIT_PLUGIN_PATH="$T/guide:$T/root$pluginsdir" "$bin" "$@")
}
lk gradcheck logreg.ini --tolerance 1e-6 >"$T/out" 2>&1
check "logreg's backward passes gradcheck at 1e-6" test $? -eq 0
lk train logreg.ini --out "$T/lr" --quiet >"$T/out" 2>&1
check "logreg trains" test $? -eq 0
check "... to a validation accuracy above 0.85" \
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "val_accuracy") c = i; next }
    c && $c != "" { v = $c } END { exit !(c && v > 0.85) }' "$T/lr/metrics.csv"

lk train trials.ini --out "$T/full" --quiet >/dev/null 2>&1
check "trials trains logreg" test $? -eq 0
lk train trials.ini --set loop.max_epochs=7 --out "$T/half" --quiet >/dev/null 2>&1 &&
  lk train trials.ini --resume "$T/half/checkpoints/last.ckpt" --quiet >/dev/null 2>&1
check "trials: stopped after 7 epochs and resumed, it ends where the full run does" \
  sh -c "'$LOOPKIT' dump '$T/full/checkpoints/last.ckpt' >'$T/a' && '$LOOPKIT' dump '$T/half/checkpoints/last.ckpt' >'$T/b' && [ -s '$T/a' ] && cmp -s '$T/a' '$T/b'"
lk train trials.ini --set trials.lr=1e308 --set loop.max_epochs=2 --out "$T/nan" --quiet >/dev/null 2>&1
check "trials: a NaN from the closure leaves the weights alone" \
  sh -c "'$LOOPKIT' dump '$T/nan/checkpoints/last.ckpt' | awk '{ n++; if (\$2 != 0) bad = 1 } END { exit bad || n != 3 }'"
lk train logreg.ini --set logreg.l2=-1 --out "$T/bad1" >"$T/out" 2>&1
check "logreg: l2 = -1 is refused by the range its table declares" \
  sh -c "test $? -eq 2 && grep -q 'option logreg.l2 = -1: must be >= 0$' '$T/out'"
lk train trials.ini --set trials.factors=0.5,0,2 --out "$T/bad2" >"$T/out" 2>&1
check "trials: a factor of 0 is refused by the range, naming the value" \
  sh -c "test $? -eq 2 && grep -q 'option trials.factors = 0.5,0,2: value 2 must be > 0$' '$T/out'"
lk inspect logreg >"$T/out" 2>&1
check "inspect logreg shows the ranges as the guide does" \
  sh -c "grep -Eq '^  l2 +double \[0, inf\) default 0$' '$T/out' && grep -Eq '^  inputs +int \[1, inf\) default \(required\)$' '$T/out'"
finish

#!/bin/sh
# The SDK: make install into a staging directory, build examples/plugin with
# nothing but pkg-config loopkit, and train with it using the installed
# loopkit.
. "$LK_SRCDIR/tests/cli/lib.sh"
: "${LK_BUILDDIR:?}"

make -s -C "$LK_BUILDDIR" install DESTDIR="$T/root" >"$T/install.log" 2>&1
check "make install into a staging directory" test $? -eq 0
libdir=$(pkg-config --variable=libdir "$LK_BUILDDIR/loopkit.pc")
bindir=$(pkg-config --variable=exec_prefix "$LK_BUILDDIR/loopkit.pc")/bin
pluginsdir=$(pkg-config --variable=pluginsdir "$LK_BUILDDIR/loopkit.pc")
check "installed: bin/loopkit" test -x "$T/root$bindir/loopkit"
check "installed: libloopkit.so" sh -c "ls '$T/root$libdir'/libloopkit.so* >/dev/null"
check "installed: plugins in lib/loopkit" test -f "$T/root$pluginsdir/sgd.so"
check "installed: headers" test -f "$T/root$(pkg-config --variable=includedir "$LK_BUILDDIR/loopkit.pc")/loopkit/plugin.h"
check "installed: loopkit.pc" test -f "$T/root$libdir/pkgconfig/loopkit.pc"
mandir=$(sed -n 's/^mandir = //p' "$LK_BUILDDIR/Makefile")
mandir=$(echo "$mandir" | sed "s|\${datarootdir}|$(sed -n 's/^datarootdir = //p' "$LK_BUILDDIR/Makefile")|;s|\${prefix}|$(sed -n 's/^prefix = //p' "$LK_BUILDDIR/Makefile")|")
for page in man1/loopkit.1 man5/loopkit.ini.5 man7/loopkit-plugin.7; do
  check "installed: $page" test -s "$T/root$mandir/$page"
done
check "plugins export exactly one symbol" \
  test "$(nm -D --defined-only "$T/root$pluginsdir/sgd.so" | awk '$2 ~ /[TDRB]/' | wc -l)" -eq 1

cp -R "$LK_SRCDIR/examples/plugin" "$T/plugin"
chmod -R u+w "$T/plugin"
rm -f "$T/plugin/quadratic.so"
PKG_CONFIG_PATH="$T/root$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$T/root" \
  make -s -C "$T/plugin" >"$T/build.log" 2>&1
check "the example plugin builds with pkg-config loopkit only" test -f "$T/plugin/quadratic.so"

cd "$T/plugin" || exit 1
LD_LIBRARY_PATH="$T/root$libdir" LOOPKIT_PLUGIN_PATH="$T/plugin:$T/root$pluginsdir" \
  "$T/root$bindir/loopkit" train quadratic.ini --out "$T/qrun" >"$T/out" 2>&1
check "the installed loopkit trains the out-of-tree plugin" test $? -eq 0
check "it converges to x = 3" sh -c "'$LOOPKIT' dump '$T/qrun/checkpoints/last.ckpt' | awk '{ n++; d = \$2 - 3; if (d * d > 1e-12) bad = 1 } END { exit bad || n != 4 }'"
LD_LIBRARY_PATH="$T/root$libdir" LOOPKIT_PLUGIN_PATH="$T/plugin:$T/root$pluginsdir" \
  "$T/root$bindir/loopkit" train quadratic.ini --out "$T/qbad" --set quadratic.n=-1 >"$T/out" 2>&1
check "the installed loopkit enforces the plugin's range: n = -1 is refused" \
  sh -c "test $? -eq 2 && grep -q 'option quadratic.n = -1: must be >= 0' '$T/out'"
finish

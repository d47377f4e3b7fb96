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
for page in man1/loopkit.1 man5/loopkit.ini.5 man7/loopkit-plugin.7 man3/lk_bind.3 man3/lk_run_new.3; do
  check "installed: $page" test -s "$T/root$mandir/$page"
done
check "a staged install (DESTDIR) runs no ldconfig" sh -c "! grep -q ldconfig '$T/install.log'"

# The installed loopkit starts without LD_LIBRARY_PATH or ldconfig: its
# RUNPATH names the library directory (libtool sets none for one that
# ld.so.conf lists, such as /usr/local/lib, and there a new
# libloopkit.so.0 is not found until ldconfig rebuilds the cache).
if command -v readelf >/dev/null 2>&1; then
  check "installed loopkit: RUNPATH [\$ORIGIN/../lib:$libdir]" \
    sh -c "readelf -d '$T/root$bindir/loopkit' | grep -q 'RUNPATH.*\[\$ORIGIN/\.\./lib:$libdir\]'"
else
  echo "ok $((n += 1)) - installed loopkit: RUNPATH # SKIP no readelf"
fi
# The install hook: after a real install (no DESTDIR) it runs the
# installed loopkit, and only when that does not start runs ldconfig (as
# root) or says what to do. A fake loopkit and a fake ldconfig stand in.
mkdir "$T/hook" "$T/hook/ok" "$T/hook/broken"
printf '#!/bin/sh\nexit 0\n' >"$T/hook/ok/loopkit"
printf '#!/bin/sh\necho "libloopkit.so.0: cannot open shared object file" >&2; exit 127\n' >"$T/hook/broken/loopkit"
printf '#!/bin/sh\necho ran >>"%s"\n' "$T/hook/ldconfig.ran" >"$T/hook/ldconfig"
chmod +x "$T/hook/ok/loopkit" "$T/hook/broken/loopkit" "$T/hook/ldconfig"
hook() { # BINDIR [DESTDIR]
  rm -f "$T/hook/ldconfig.ran"
  make -s -C "$LK_BUILDDIR" install-exec-hook bindir="$1" DESTDIR="${2:-}" \
    LDCONFIG="$T/hook/ldconfig" >"$T/hook/out" 2>&1
}
hook "$T/hook/ok"
check "install hook: a loopkit that starts needs no ldconfig" \
  sh -c "[ ! -e '$T/hook/ldconfig.ran' ] && [ ! -s '$T/hook/out' ]"
hook "$T/hook/broken" "$T/stage"
check "install hook: nothing with DESTDIR, even for a loopkit that does not start" \
  sh -c "[ ! -e '$T/hook/ldconfig.ran' ] && [ ! -s '$T/hook/out' ]"
hook "$T/hook/broken"
if [ "$(id -u)" = 0 ]; then
  check "install hook: as root, ldconfig runs when the loopkit does not start" test -e "$T/hook/ldconfig.ran"
  check "... and a loopkit that still does not start is named" \
    grep -q "warning: $T/hook/broken/loopkit does not start even after" "$T/hook/out"
else
  check "install hook: not root, ldconfig does not run" test ! -e "$T/hook/ldconfig.ran"
  check "... and the note says to run it" grep -q "run ldconfig as root" "$T/hook/out"
fi

check "plugins export exactly one symbol" \
  test "$(nm -D --defined-only "$T/root$pluginsdir/sgd.so" | awk '$2 ~ /[TDRB]/' | wc -l)" -eq 1

# lk_bind cannot tell how many values its array holds: the installed
# header makes the compiler say so (lk_bind_n and LK_BIND count them).
cat >"$T/bind.c" <<'C'
#include <loopkit/loopkit.h>
static double f(int a) { return a; }
int main(void) {
  int a = 1;
  const void *args[] = {&a};
  lk_bound *b = NULL;
  int rc = lk_bind((void (*)(void))f, "double (int)", args, &b);
  lk_bound_free(b);
  return rc;
}
C
cflags=$(PKG_CONFIG_PATH="$T/root$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$T/root" pkg-config --cflags loopkit)
# shellcheck disable=SC2086
${CC:-cc} -c $cflags "$T/bind.c" -o "$T/bind.o" >"$T/bind.log" 2>&1
check "a program calling lk_bind gets a warning that names lk_bind_n and LK_BIND" \
  grep -q "lk_bind cannot tell how many values ARGS holds: use lk_bind_n or LK_BIND" "$T/bind.log"

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

# The layer kit: examples/nn_plugin, an MLP written with <loopkit/nn.h>,
# builds the same way (the installed header, no -lloopkit) and learns the
# three spirals, which no linear model separates (a linear classifier stays
# near a test loss of 1 and an accuracy of 0.5): test loss < 0.3 and
# accuracy > 0.9 (measured: 0.09 and 0.96).
check "installed: loopkit/nn.h" test -f "$T/root$(pkg-config --variable=includedir "$LK_BUILDDIR/loopkit.pc")/loopkit/nn.h"
check "libloopkit exports the layer kit" sh -c "nm -D --defined-only '$T/root$libdir'/libloopkit.so | grep -q ' T lk_nn_conv2d_forward\$'"
cp -R "$LK_SRCDIR/examples/nn_plugin" "$T/nn_plugin"
chmod -R u+w "$T/nn_plugin"
rm -f "$T/nn_plugin/nnmlp.so"
PKG_CONFIG_PATH="$T/root$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$T/root" \
  make -s -C "$T/nn_plugin" >"$T/nn_build.log" 2>&1
check "examples/nn_plugin builds with pkg-config loopkit only" test -f "$T/nn_plugin/nnmlp.so"
check "the nn plugin exports one symbol" \
  test "$(nm -D --defined-only "$T/nn_plugin/nnmlp.so" | awk '$2 ~ /[TDRB]/' | wc -l)" -eq 1
cd "$T/nn_plugin" || exit 1
LD_LIBRARY_PATH="$T/root$libdir" LOOPKIT_PLUGIN_PATH="$T/nn_plugin:$T/root$pluginsdir" \
  "$T/root$bindir/loopkit" train nnmlp.ini --out "$T/nnrun" --quiet >"$T/nn_out" 2>&1
check "the installed loopkit trains the nn plugin" test $? -eq 0
test_row=$(awk -F, 'NR > 1 && $(NF - 1) != "" { r = $(NF - 1) " " $NF } END { print r }' "$T/nnrun/metrics.csv")
check "it learns the spirals: test loss < 0.3, accuracy > 0.9 (got: $test_row)" \
  sh -c "echo '$test_row' | awk '{ exit !(\$1 != \"\" && \$1 < 0.3 && \$2 > 0.9) }'"
finish

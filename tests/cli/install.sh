#!/bin/sh
# make install prefix=DIR on a tree configured for another prefix (this
# build's): the installed loopkit starts without LD_LIBRARY_PATH or
# ldconfig (a RUNPATH of $ORIGIN/../lib), finds its plugins beside its
# library, trains, and still does once the tree is moved; loopkit.pc says
# where it landed, and a plugin builds against it.
. "$LK_SRCDIR/tests/cli/lib.sh"
: "${LK_BUILDDIR:?}"
unset LOOPKIT_PLUGIN_PATH LD_LIBRARY_PATH

configured=$(sed -n 's/^prefix = //p' "$LK_BUILDDIR/Makefile")
P=$T/inst
# LDCONFIG=false: the hook must find nothing to do (it would say so).
make -s -C "$LK_BUILDDIR" install prefix="$P" LDCONFIG=false >"$T/install.log" 2>&1
check "make install prefix=$P (configured for $configured)" test $? -eq 0
check "... the install hook finds that the installed loopkit starts" \
  sh -c "! grep -q 'does not start' '$T/install.log'"
if command -v readelf >/dev/null 2>&1; then
  check "its RUNPATH names \$ORIGIN/../lib first" \
    sh -c "readelf -d '$P/bin/loopkit' | grep -q 'RUNPATH.*\[\$ORIGIN/\.\./lib:'"
else
  echo "ok $((n += 1)) - its RUNPATH # SKIP no readelf"
fi
check "it starts, without LD_LIBRARY_PATH or ldconfig" "$P/bin/loopkit" --version
"$P/bin/loopkit" plugins >"$T/plugins" 2>&1
check "loopkit plugins finds the plugins in $P/lib/loopkit" \
  sh -c "grep -q '^sgd .*$P/lib/loopkit/sgd.so' '$T/plugins' && grep -q '$P/lib/loopkit (the installed plugin directory)' '$T/plugins'"
cd "$T" || exit 1
"$P/bin/loopkit" train "$LK_SRCDIR/examples/rosenbrock.ini" --out "$T/r1" --quiet >"$T/r1.out" 2>&1
check "it trains examples/rosenbrock.ini with its own plugins" grep -q '^trained 5000 steps' "$T/r1.out"
mv "$P" "$T/moved"
"$T/moved/bin/loopkit" train "$LK_SRCDIR/examples/rosenbrock.ini" --out "$T/r2" --quiet >"$T/r2.out" 2>&1
check "... and so does the tree moved elsewhere" grep -q '^trained 5000 steps' "$T/r2.out"
check "... to the same bits" cmp -s "$T/r1/checkpoints/last.ckpt" "$T/r2/checkpoints/last.ckpt"
mv "$T/moved" "$P"
check "loopkit.pc says prefix=$P" grep -qx "prefix=$P" "$P/lib/pkgconfig/loopkit.pc"
if command -v pkg-config >/dev/null 2>&1; then
  PKG_CONFIG_PATH=$P/lib/pkgconfig
  export PKG_CONFIG_PATH
  # shellcheck disable=SC2046 # pkg-config's output is a list of flags
  ${LK_CC:-cc} ${LK_SANITIZE:-} -shared -fPIC $(pkg-config --cflags loopkit) \
    "$LK_SRCDIR/examples/plugin/quadratic.c" -o "$T/quadratic.so" >"$T/cc.log" 2>&1
  check "a plugin builds with pkg-config --cflags loopkit against it" test -f "$T/quadratic.so"
  check "... whose pluginsdir is $P/lib/loopkit" \
    test "$(pkg-config --variable=pluginsdir loopkit)" = "$P/lib/loopkit"
else
  echo "ok $((n += 1)) - a plugin builds with pkg-config # SKIP no pkg-config"
fi
finish

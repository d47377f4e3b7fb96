#!/bin/sh
# loopkit plugins, inspect, --version, --help; malformed descriptors.
. "$LK_SRCDIR/tests/cli/lib.sh"

expect 0 '^loopkit [0-9]+\.[0-9]+\.[0-9]+ \(plugin ABI 1\.7\)' "--version" -- --version
expect 0 'loopkit plugins' "--help lists the commands" -- --help
expect 0 'sgd +optimizer +[0-9.]+ +/.*/sgd\.so' "plugins lists sgd with kind, version, path" -- plugins
check "plugins lists rosenbrock as step,backward" grep -Eq '^rosenbrock +step,backward ' "$T/out"
check "plugins lists zero and simple" sh -c "grep -Eq '^zero +zero_grad ' '$T/out' && grep -Eq '^simple +profiler ' '$T/out'"
check "plugins prints each summary" grep -q 'torch.optim.SGD' "$T/out"
expect 0 'kinds: +optimizer' "inspect sgd shows its kind" -- inspect sgd
check "inspect shows every option with type, range (if any) and default" \
  sh -c "grep -Eq '^  lr +double \[0, inf\) +default ' '$T/out' && grep -Eq '^  nesterov +bool +default false' '$T/out' && grep -Eq '^  momentum +double \[0, inf\) +default 0' '$T/out' && grep -Eq '^  dampening +double +default 0' '$T/out'"
expect 0 'dtype +f64\|f32 +default f64' "inspect shows enum choices" -- inspect rosenbrock
expect 0 'path: +/.*/probe.so' "inspect by name finds test plugins on the path" -- inspect probe
expect 0 'name: +probe' "inspect by path" -- inspect "$(sed -n 's/^path: *//p' "$T/out")"

# ---- malformed descriptors (tests/broken): refused with what is wrong,
# never followed, and one bad plugin on the path does not stop the listing.
: "${LK_BROKEN_DIR:?}"
B=$LK_BROKEN_DIR
bad() {
  expect 2 "plugin $B/$1.so \($B/$1.so\): $2" "inspect refuses $1: $(printf %s "$2" | tr -d '\\')" -- inspect "$B/$1.so"
}
bad unterminated 'option 3 has a name outside the plugin'
bad endofseg 'options table has no terminator: its segment ends after 4 entries'
bad outside 'summary is not a string in the plugin \(it points outside the plugin\)'
bad badtype 'option 2 \(beta\) has an unknown type 99'
bad badoptname 'option 1 has an invalid name "learning rate": option names are \[A-Za-z0-9_\]\+'
bad manyopts 'options table has more than 256 options'
bad badops "zero_grad ops entry zero_grad points outside any loaded code"
bad opsoutside 'its step ops table is not in the plugin'
expect 2 "plugin $B/unterminated.so \($B/unterminated.so\): option 3 has a name outside the plugin" \
  "train refuses it before training (status 2)" -- train "$LK_SRCDIR/examples/rosenbrock.ini" \
  --out "$T/run-bad" --set "plugins.optimizer=$B/unterminated.so"

"$LOOPKIT" plugins >"$T/good" 2>/dev/null
mkdir "$T/bad"
for b in unterminated endofseg outside badtype badoptname manyopts badops opsoutside; do
  cp "$B/$b.so" "$T/bad/$b.so"
done
chmod 0755 "$T/bad" "$T/bad/"*.so
saved=$LOOPKIT_PLUGIN_PATH
LOOPKIT_PLUGIN_PATH="$T/bad:$LOOPKIT_PLUGIN_PATH"
# stdout and stderr apart: in one file, buffered stdout may be cut by a message
"$LOOPKIT" plugins >"$T/list" 2>"$T/err"
status=$?
LOOPKIT_PLUGIN_PATH=$saved
check "plugins exits 1 with bad plugins on the path (got $status)" test "$status" -eq 1
check "plugins names each bad plugin and what is wrong" \
  grep -q "^loopkit: plugin $T/bad/endofseg.so ($T/bad/endofseg.so): options table has no terminator" "$T/err"
check "... one message for each" test "$(grep -c "^loopkit: plugin $T/bad/" "$T/err")" -eq 8
missing=$(grep -E '^[A-Za-z0-9_-]+ ' "$T/good" | grep -v '^NAME ' | while IFS= read -r line; do
  grep -qxF -- "$line" "$T/list" || echo "$line"
done)
check "plugins still lists every good plugin on the path ($(grep -cE '^[A-Za-z0-9_-]+ ' "$T/good"))${missing:+; missing: $missing}" test -z "$missing"
LOOPKIT_PLUGIN_PATH="$T/bad:$LOOPKIT_PLUGIN_PATH"
"$LOOPKIT" plugins >"$T/both" 2>&1
LOOPKIT_PLUGIN_PATH=$saved
check "in one file, each reason comes right after its plugin's line" \
  sh -c "grep -A1 '^endofseg .*(cannot load)' '$T/both' | tail -n 1 | grep -q '^loopkit: plugin $T/bad/endofseg.so .*no terminator'"
check "plugins lists the 8 bad ones as cannot load" \
  test "$(grep -cE "^[a-z]+ +\(cannot load\) +- +$T/bad/[a-z]+\.so$" "$T/list")" -eq 8
# ---- where plugins are looked for, and the listing saying so ----
: "${LK_BUILDDIR:?}"
saved=$LOOPKIT_PLUGIN_PATH
unset LOOPKIT_PLUGIN_PATH
expect 0 "^sgd +optimizer +[0-9.]+ +$LK_BUILDDIR/plugins/\.libs/sgd\.so\$" \
  "the build tree's loopkit finds the plugins just built, with no LOOPKIT_PLUGIN_PATH" -- plugins
check "... and says where it looked: the build tree, then the installed directory" \
  sh -c "grep -A2 '^searched, in order:\$' '$T/out' | sed -n 2p | grep -qxF '  $LK_BUILDDIR/plugins/.libs (the build tree this loopkit runs from)' &&
    grep -q '^  $(pkg-config --variable=pluginsdir "$LK_BUILDDIR/loopkit.pc") (the installed plugin directory)' '$T/out'"
LOOPKIT_PLUGIN_PATH=$LK_BUILDDIR/plugins
export LOOPKIT_PLUGIN_PATH
expect 0 "^path: +$LK_BUILDDIR/plugins/\.libs/sgd\.so\$" \
  "LOOPKIT_PLUGIN_PATH=build/plugins finds what libtool put in its .libs" -- inspect sgd
expect 0 "^  $LK_BUILDDIR/plugins/\.libs \(LOOPKIT_PLUGIN_PATH, libtool's \.libs of the entry\)\$" \
  "... and plugins lists that .libs right after the entry" -- plugins
check "... the entry itself holding no plugin" \
  grep -qxF "  $LK_BUILDDIR/plugins (LOOPKIT_PLUGIN_PATH): holds no NAME.so file" "$T/out"
# The same program elsewhere (as an installed one is) never looks in the
# build tree: a copy of the real binary, the library from the build tree.
if [ -x "$LK_BUILDDIR/.libs/loopkit" ]; then
  mkdir "$T/bin" "$T/empty"
  cp "$LK_BUILDDIR/.libs/loopkit" "$T/bin/loopkit"
  LOOPKIT_PLUGIN_PATH="$T/empty:$T/nothing"
  LD_LIBRARY_PATH="$LK_BUILDDIR/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$T/bin/loopkit" plugins >"$T/elsewhere" 2>&1
  status=$?
  check "a loopkit outside the build tree does not search it (status $status)" \
    sh -c "[ $status -eq 0 ] && ! grep -q '(the build tree\|$LK_BUILDDIR/' '$T/elsewhere'"
  check "... and its listing says why each directory gave nothing" \
    sh -c "grep -qxF '  $T/empty (LOOPKIT_PLUGIN_PATH): holds no NAME.so file' '$T/elsewhere' &&
      grep -qxF '  $T/nothing (LOOPKIT_PLUGIN_PATH): no such directory' '$T/elsewhere'"
  if ! grep -q '^[a-z_0-9-]* .*\.so$' "$T/elsewhere"; then
    check "... and an empty table says so and what to set" \
      sh -c "grep -q '^no plugins found; searched, in order:' '$T/elsewhere' && grep -q '^set LOOPKIT_PLUGIN_PATH' '$T/elsewhere'"
  fi
else
  echo "ok $((n += 1)) - a loopkit outside the build tree does not search it # SKIP no .libs/loopkit"
fi
LOOPKIT_PLUGIN_PATH=$saved
finish

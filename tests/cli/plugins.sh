#!/bin/sh
# loopkit plugins, inspect, --version, --help; malformed descriptors.
. "$LK_SRCDIR/tests/cli/lib.sh"

expect 0 '^loopkit [0-9]+\.[0-9]+\.[0-9]+ \(plugin ABI 1\.4\)' "--version" -- --version
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
finish

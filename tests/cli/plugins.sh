#!/bin/sh
# loopkit plugins, inspect, --version, --help.
. "$LK_SRCDIR/tests/cli/lib.sh"

expect 0 '^loopkit [0-9]+\.[0-9]+\.[0-9]+ \(plugin ABI 1\.4\)' "--version" -- --version
expect 0 'loopkit plugins' "--help lists the commands" -- --help
expect 0 'sgd +optimizer +[0-9.]+ +/.*/sgd\.so' "plugins lists sgd with kind, version, path" -- plugins
check "plugins lists rosenbrock as step,backward" grep -Eq '^rosenbrock +step,backward ' "$T/out"
check "plugins lists zero and simple" sh -c "grep -Eq '^zero +zero_grad ' '$T/out' && grep -Eq '^simple +profiler ' '$T/out'"
check "plugins prints each summary" grep -q 'torch.optim.SGD' "$T/out"
expect 0 'kinds: +optimizer' "inspect sgd shows its kind" -- inspect sgd
check "inspect shows every option with type and default" \
  sh -c "grep -Eq '^  lr +double +default ' '$T/out' && grep -Eq '^  nesterov +bool +default false' '$T/out' && grep -Eq '^  momentum +double +default 0' '$T/out'"
expect 0 'dtype +f64\|f32 +default f64' "inspect shows enum choices" -- inspect rosenbrock
expect 0 'path: +/.*/probe.so' "inspect by name finds test plugins on the path" -- inspect probe
expect 0 'name: +probe' "inspect by path" -- inspect "$(sed -n 's/^path: *//p' "$T/out")"
finish

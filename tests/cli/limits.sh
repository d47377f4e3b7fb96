#!/bin/sh
# Values a run cannot take, refused with the accepted range before
# anything is made (issue 23, item 7): [loop] threads above the layer
# kit's 256 (52dddba clamped it to 4096 and adam then failed "out of
# memory for 4096 threads"); text's batch_size too large for the model,
# which failed only at the first step, after the run directory was made.
. "$LK_SRCDIR/tests/cli/lib.sh"

config ros <<INI
[loop]
max_steps = 2
[plugins]
step = rosenbrock
optimizer = adam
INI
for t in 257 4097 5000; do
  expect 2 "^loopkit: --set loop\\.threads=$t: loop\\.threads = $t: expected 0 \\(one per CPU the process may run on\\) to 256" \
    "[loop] threads = $t: refused with the range" -- train "$T/ros.ini" --set loop.threads=$t --out "$T/t$t"
  check "... and no run directory" test ! -e "$T/t$t"
done
printf '[loop]\nthreads = 300\n' >"$T/threads.ini"
sed 1d "$T/ros.ini" >>"$T/threads.ini"
expect 2 "^loopkit: $T/threads\\.ini:2: loop\\.threads = 300: expected 0 .* to 256" \
  "... the config's line named" -- train "$T/threads.ini" --out "$T/t300"
# (sgd: adam's context of 256 threads takes 30 s under valgrind)
expect 0 'trained 2 steps' "[loop] threads = 256, the largest, is taken" \
  -- train "$T/ros.ini" --set loop.threads=256 --set plugins.optimizer=sgd \
  --out "$T/t256" --quiet
expect 0 'trained 2 steps' "... and 2 with adam's kit context" \
  -- train "$T/ros.ini" --set loop.threads=2 --out "$T/t2" --quiet
finish

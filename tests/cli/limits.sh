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
  -- train "$T/ros.ini" --set loop.threads=256 --set plugins.optimizer=sgd --set sgd.lr=0.001 \
  --out "$T/t256" --quiet
expect 0 'trained 2 steps' "... and 2 with adam's kit context" \
  -- train "$T/ros.ini" --set loop.threads=2 --out "$T/t2" --quiet

# text.batch_size = 1048576 windows of 64 tokens: 2^26 positions, more
# than a GPT of n_embd 128 and vocab_size 256 holds (4194303: the kit's
# sizes are ints). gpt reads the data's batch_size at create
# (lk_host_data_batch_size).
awk 'BEGIN { for (i = 0; i < 400; i++) printf "%c", 97 + i * 7 % 26 }' >"$T/text.txt"
config lm <<INI
[loop]
max_steps = 1
[plugins]
step = gpt
data = text
optimizer = sgd
[gpt]
n_layer = 1
n_head = 4
n_embd = 128
block_size = 64
vocab_size = 256
[text]
path = $T/text.txt
block_size = 64
batch_size = 2
val_split = 0
[sgd]
lr = 0.1
INI
expect 2 "^loopkit: $T/lm\.ini:[0-9]*: plugin gpt .*failed to start: the data's batch_size = 1048576 \(--set text\.batch_size=1048576\) is too large: batches of 1048576 samples of 64 tokens, .* at most 4194303 positions \(batch_size 65535" \
  "text.batch_size = 1048576: refused at create, naming the option, the value and why" \
  -- train "$T/lm.ini" --set text.batch_size=1048576 --out "$T/b1"
check "... and no run directory" test ! -e "$T/b1"
sed 's/^batch_size = 2$/batch_size = 65536/' "$T/lm.ini" >"$T/lm2.ini"
expect 2 "batch_size = 65536 \($T/lm2\.ini:16\) is too large" \
  "... 65536 in the config: its line named" \
  -- train "$T/lm2.ini" --out "$T/b2"
expect 0 'trained 1 steps' "... and batch_size = 2 trains" \
  -- train "$T/lm.ini" --out "$T/b3" --quiet
finish

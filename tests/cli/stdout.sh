#!/bin/sh
# A standard output that fails (issue 23, item 7): every command that
# prints to it, run with its output on /dev/full, exits 1 and says so on
# stderr, where on 52dddba plugins, inspect and plot --list exited 0. The
# same commands with a working output exit 0 (the control).
. "$LK_SRCDIR/tests/cli/lib.sh"

if [ ! -c /dev/full ]; then
  echo "ok 1 - stdout # SKIP no /dev/full"
  echo "1..1"
  exit 0
fi

# full DESC -- ARGS: loopkit ARGS with stdout on /dev/full exits 1 and
# says on stderr that it could not write its output (main.c's check, or
# predict's own); with stdout in a file it exits 0 and
# prints something there.
full() {
  desc=$1
  shift 2
  "$LOOPKIT" "$@" >/dev/full 2>"$T/err"
  got=$?
  if [ "$got" -ne 1 ]; then
    not_ok "$desc: exit 1 on /dev/full" "exit status $got" "$(head -c 1000 "$T/err")"
  elif ! grep -Eq '^loopkit: .*cannot write (to )?the (standard )?output' "$T/err"; then
    not_ok "$desc: exit 1 on /dev/full" "stderr does not say why:" "$(head -c 1000 "$T/err")"
  else
    ok "$desc: exit 1 on /dev/full, and stderr says why"
  fi
  "$LOOPKIT" "$@" >"$T/stdout" 2>"$T/err"
  got=$?
  if [ "$got" -ne 0 ] || [ ! -s "$T/stdout" ]; then
    not_ok "$desc: ... and 0 on a file" "exit status $got" "$(head -c 1000 "$T/err")"
  else
    ok "$desc: ... and 0 on a file"
  fi
}

full "loopkit plugins" -- plugins
full "loopkit inspect sgd" -- inspect sgd
full "loopkit --help" -- --help
full "loopkit --version" -- --version
full "loopkit new --help" -- new --help

# A classifier with a test split, a checkpoint to read back.
awk 'BEGIN { print "a,b,label"
  for (i = 0; i < 40; i++) { c = i % 2; printf "%.3f,%.3f,%d\n", c + (i * 37 % 10) / 20, (i * 53 % 10) / 20, c } }' >"$T/train.csv"
config cls <<INI
[loop]
max_epochs = 1
[plugins]
step = softmax
optimizer = sgd
data = csv
[csv]
path = $T/train.csv
val_split = 0.25
test_split = 0.25
batch_size = 10
[softmax]
inputs = 2
classes = 2
[sgd]
lr = 0.1
INI
"$LOOPKIT" train "$T/cls.ini" --out "$T/run" --quiet >/dev/null 2>&1
CK=$T/run/checkpoints/last.ckpt
check "a classifier trained" test -s "$CK"
full "loopkit dump" -- dump "$CK"
full "loopkit test" -- test "$T/cls.ini" --ckpt "$CK"
full "loopkit validate" -- validate "$T/cls.ini" --ckpt "$CK"
full "loopkit predict to the standard output" -- predict "$T/cls.ini" --ckpt "$CK"
full "loopkit gradcheck" -- gradcheck "$T/cls.ini" --batches 1
full "loopkit export" -- export "$CK" -o "$T/model.safetensors"
if [ "${LK_HAVE_CAIRO:-no}" = yes ]; then
  full "loopkit plot --list" -- plot "$T/run" --list
else
  echo "ok $((n += 1)) - loopkit plot --list # SKIP built without cairo"
fi

# A language model: loopkit generate writes its text there.
awk 'BEGIN { for (i = 0; i < 200; i++) printf "abcab%c", 97 + i % 3 }' >"$T/text.txt"
config lm <<INI
[loop]
max_steps = 1
[plugins]
step = gpt
data = text
optimizer = sgd
[gpt]
n_layer = 1
n_head = 1
n_embd = 8
block_size = 8
vocab_size = 128
[text]
path = $T/text.txt
block_size = 8
batch_size = 2
val_split = 0
[sgd]
lr = 0.1
INI
"$LOOPKIT" train "$T/lm.ini" --out "$T/lm" --quiet >/dev/null 2>&1
check "a language model trained" test -s "$T/lm/checkpoints/last.ckpt"
full "loopkit generate" -- generate "$T/lm.ini" --ckpt "$T/lm/checkpoints/last.ckpt" --tokens 5

# A command that fails for its own reason keeps its status and message.
"$LOOPKIT" inspect no_such_plugin >/dev/full 2>"$T/err"
check "a failure of its own keeps its status (2) on /dev/full" test $? -eq 2
check "... and its message, alone" sh -c "! grep -q 'standard output' '$T/err' && grep -q no_such_plugin '$T/err'"
finish

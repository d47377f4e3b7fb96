#!/bin/sh
# loopkit summary CONFIG: the model's layers, output shapes and parameter
# counts, then the totals (Lightning's ModelSummary); loopkit train prints
# the totals at start. Models declare layers with lk_host_add_layer.
. "$LK_SRCDIR/tests/cli/lib.sh"
E=$(cd "$LK_SRCDIR/examples" && pwd)
cd "$T" || exit 1

# params FILE: the sum of the table's params column (the one before last;
# the shape before it may have spaces).
params() {
  awk '$1 ~ /^[0-9]+$/ && $NF ~ /^[0-9]+$/ { s += $(NF - 1) } END { print s + 0 }' "$1"
}

# ---- a model that declares its layers -------------------------------------
config layered <<INI
[loop]
max_steps = 2
[plugins]
step = layered
optimizer = sgd
[sgd]
lr = 0.1
INI
"$LOOPKIT" summary "$T/layered.ini" >"$T/l.out" 2>&1
check "summary of a model: exit 0" test $? -eq 0
check "... a row per declared layer, in order, with type and output shape" \
  sh -c "grep -Eq '^ +0 +a +thing +\[3, 4\] +12 +4$' '$T/l.out' &&
    grep -Eq '^ +1 +b +relu +\[3, 4\] +0 +0$' '$T/l.out'"
check "... a parameter of no declared layer under its name's first parts (extra.0)" \
  grep -Eq '^ +2 +extra\.0 +- +- +5 +0$' "$T/l.out"
check "... the totals: parameters, bytes (f32 and f64), buffers, activations" \
  grep -q '^17 parameters (all trainable, 88 B), 4 buffer values, activations 24 values (96 B) a sample$' "$T/l.out"
check "... the rows' parameters add up to the total" test "$(params "$T/l.out")" = 17

# A frozen parameter: sgd steps only a.weight.
"$LOOPKIT" summary "$T/layered.ini" --set sgd.params=a.weight >"$T/f.out" 2>&1
check "parameters no optimizer steps are not trainable" \
  grep -q '^17 parameters (12 trainable, 88 B)' "$T/f.out"

expect 2 'layer "a" declared twice' "a layer declared twice: refused at create, naming it" \
  -- summary "$T/layered.ini" --set layered.mode=twice
expect 2 'layer "b": output dimension 1 is 0' "an output dimension of 0: refused" \
  -- summary "$T/layered.ini" --set layered.mode=zero
expect 2 'lk_host_add_layer\("c", ""' "an empty type: refused" \
  -- summary "$T/layered.ini" --set layered.mode=empty

# ---- loopkit train prints the totals at start ------------------------------
"$LOOPKIT" train "$T/layered.ini" --out "$T/run" >"$T/t.out" 2>&1
check "train prints the model's totals at start" \
  grep -q '^model: 17 parameters (all trainable, 88 B), 4 buffer values, activations 24 values (96 B) a sample$' "$T/t.out"
"$LOOPKIT" train "$T/layered.ini" --out "$T/run-q" --quiet >"$T/q.out" 2>&1
check "... not with --quiet" sh -c "! grep -q '^model:' '$T/q.out'"

# ---- the bundled GPT declares its layers -----------------------------------
"$LOOPKIT" summary "$E/gpt-jargon.ini" >"$T/g.out" 2>&1
check "gpt: exit 0" test $? -eq 0
check "gpt: embeddings, then each block's parts, in the forward's order, shapes [block_size, width]" \
  sh -c "grep -Eq '^ +0 +transformer\.wte +embedding +\[64, 128\] +32768 ' '$T/g.out' &&
    grep -Eq '^ +3 +transformer\.h\.0\.attn\.c_attn +linear +\[64, 384\] +49536 ' '$T/g.out' &&
    grep -Eq '^ +35 +lm_head +linear +\[64, 256\] +0 ' '$T/g.out'"
# nanoGPT's count: 12 L C^2 + 13 L C (biases, norms) + (V + T) C + 2 C.
check "gpt: the total is nanoGPT's formula's" \
  grep -q '^834,304 parameters (all trainable, 3.2 MiB), 0 buffer values' "$T/g.out"
check "... and the rows add up to it" test "$(params "$T/g.out")" = 834304
"$LOOPKIT" summary "$E/gpt-jargon.ini" --set gpt.n_layer=2 >"$T/g2.out" 2>&1
check "--set reshapes the model: 2 blocks, 20 rows" \
  sh -c "test \"\$(grep -Ec '^ +[0-9]+ ' '$T/g2.out')\" = 20"

# ---- sequential declares every layer ----------------------------------------
if [ -d /usr/share/datasets/fashion-mnist ]; then
  "$LOOPKIT" summary "$E/fashion-mnist-cnn.ini" \
    --set 'sequential.layers=conv2d(8, 3, padding=1), batchnorm2d, relu, maxpool2d(2), flatten, linear(10)' \
    >"$T/s.out" 2>&1
  check "sequential: a row per layer, torch's index as its name, its type and output shape" \
    sh -c "grep -Eq '^ +0 +0 +conv2d +\[8, 28, 28\] +80 +0$' '$T/s.out' &&
      grep -Eq '^ +3 +3 +maxpool2d +\[8, 14, 14\] +0 +0$' '$T/s.out' &&
      grep -Eq '^ +4 +4 +flatten +\[1568\] +0 +0$' '$T/s.out' &&
      grep -Eq '^ +5 +5 +linear +\[10\] +15690 +0$' '$T/s.out'"
  # batch norm: weight, bias; running_mean, running_var, num_batches_tracked;
  # activations: 3 x 8x28x28 (conv, norm, relu) + 2 x 1568 (pool, flatten) + 10
  check "... batch norm's parameters and buffers (running statistics and the count)" \
    grep -Eq '^ +1 +1 +batchnorm2d +\[8, 28, 28\] +16 +17$' "$T/s.out"
  check "... the totals" \
    grep -q '^15,786 parameters (all trainable, 61.7 KiB), 17 buffer values, activations 21,962 values (85.8 KiB) a sample$' "$T/s.out"
else
  ok "# SKIP sequential's summary: dataset-fashion-mnist is not installed"
fi

# ---- a model that declares nothing: rows by its tensors' names ---------------
"$LOOPKIT" summary "$E/rosenbrock.ini" >"$T/r.out" 2>&1
check "a model that declares no layers: rows by name, and it is said" \
  sh -c "grep -Eq '^ +0 +x +- +- +2 +0$' '$T/r.out' &&
    grep -q 'declares no layers' '$T/r.out'"

# ---- usage -------------------------------------------------------------------
expect 2 'no config file' "no config: usage, exit 2" -- summary
expect 2 'unexpected "--ckpt"' "--ckpt is not an option of summary" \
  -- summary "$T/layered.ini" --ckpt x
expect 2 'nosuch' "an unknown step plugin: exit 2, named" \
  -- summary "$T/layered.ini" --set plugins.step=nosuch
expect 0 'usage: loopkit summary' "--help" -- summary --help
check "the command does not write a run directory" test ! -e runs

finish

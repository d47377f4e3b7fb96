#!/bin/sh
# The rough edges a Lightning user hits (issue 30): max_steps alone bounds
# a run (max_epochs unlimited when only max_steps is given); schedule
# lengths given as auto are the run's, and resume so; text's block_size is
# the model's, and text reads several files as one; sgd's lr is required;
# validation within an epoch (val_check_interval) resumes exactly; top-k
# accuracy, macro F1 and perplexity. (Installs: install.sh; MPI: mpi.sh;
# defaults against torch: defaults.sh.)
. "$LK_SRCDIR/tests/cli/lib.sh"
cd "$T" || exit 1

train() { "$LOOPKIT" train "$@" --quiet >"$T/train.out" 2>&1; }
# rows DIR: metrics.csv's training rows (a loss and no val_ or test_ cell).
steps() { awk -F, 'NR > 1 && $3 != ""' "$1/metrics.csv" | wc -l | tr -d ' '; }
same() {
  [ "$1" = "$2" ] && return 0
  echo "# got [$1], expected [$2]"
  return 1
}

# ---- 1. a step budget means what it says ----

# One batch an epoch: 8 samples in batches of 8.
config budget <<INI
[loop]
max_steps = 20
[plugins]
step = linreg
optimizer = sgd
data = synthetic
[synthetic]
n_train = 8
n_val = 0
n_test = 0
batch_size = 8
[sgd]
lr = 0.05
INI
expect 0 'trained 20 steps \(20 epochs\)' \
  "max_steps = 20 alone, one batch an epoch: 20 steps (max_epochs unlimited)" \
  -- train "$T/budget.ini" --out "$T/b1"
check "... 20 rows in metrics.csv" same "$(steps "$T/b1")" 20
check "... and config.ini records max_epochs = -1 (no limit)" \
  grep -qx 'max_epochs = -1' "$T/b1/config.ini"
expect 0 'trained 20 steps \(20 epochs\)' "... which reruns the same from config.ini" \
  -- train "$T/b1/config.ini" --out "$T/b1-again"
check "... to the same bits" cmp -s "$T/b1/checkpoints/last.ckpt" "$T/b1-again/checkpoints/last.ckpt"
expect 0 'trained 3 steps \(3 epochs\)' \
  "max_epochs given explicitly keeps its meaning: the first limit reached stops the run" \
  -- train "$T/budget.ini" --out "$T/b2" --set loop.max_epochs=3
expect 0 'trained 1 steps? \(1 epoch\)' "neither given: one epoch, as before" \
  -- train "$T/budget.ini" --out "$T/b3" --set loop.max_steps=-1
check "... and config.ini records max_epochs = 1" grep -qx 'max_epochs = 1' "$T/b3/config.ini"
expect 0 'trained 20 steps \(20 epochs\)' "max_epochs = -1 given: no limit either" \
  -- train "$T/budget.ini" --out "$T/b4" --set loop.max_epochs=-1
expect 2 'loop.max_epochs = "0": expected an integer -1 \(no limit\) or >= 1' \
  "max_epochs = 0 is refused, naming what it accepts" \
  -- train "$T/budget.ini" --out "$T/b5" --set loop.max_epochs=0

# ---- 2. schedule lengths follow the run ----

# 32 samples in batches of 8: 4 steps an epoch, 3 epochs.
config sched <<INI
[loop]
max_epochs = 3
[plugins]
step = linreg
optimizer = sgd
data = synthetic
scheduler = cosine
[synthetic]
n_train = 32
n_val = 0
n_test = 0
batch_size = 8
[sgd]
lr = 0.1
[cosine]
interval = step
INI
lrs() { awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "lr") k = i; next } { print $k }' "$1/metrics.csv" | tr '\n' ' '; }
expect 0 'cosine: T_max = auto = 12 \(the run.s optimizer steps' \
  "cosine's T_max defaults to auto: the run's 12 optimizer steps, printed at start" \
  -- train "$T/sched.ini" --out "$T/s1"
check "... written into config.ini as the number" grep -qx 'T_max = 12' "$T/s1/config.ini"
train "$T/sched.ini" --out "$T/s1n" --set cosine.T_max=12
check "... the same rates as T_max = 12 given" same "$(lrs "$T/s1")" "$(lrs "$T/s1n")"
check "... the last step's rate is the cosine's last before eta_min" \
  same "$(lrs "$T/s1" | awk '{ print $NF }')" 0.0017037086855465904
expect 0 'cosine: T_max = auto = 5 ' "max_steps = 5 makes it 5" \
  -- train "$T/sched.ini" --out "$T/s2" --set loop.max_steps=5
expect 0 'cosine: T_max = auto = 20 ' "max_steps = 20 alone (no epoch limit): 20" \
  -- train "$T/sched.ini" --out "$T/s2b" --set loop.max_steps=20 --set loop.max_epochs=-1
expect 0 'cosine: T_max = auto = 6 ' "accumulate_grad_batches = 2: 6 optimizer steps" \
  -- train "$T/sched.ini" --out "$T/s3" --set loop.accumulate_grad_batches=2
expect 0 'cosine: T_max = auto = 3 \(the run.s epochs' "interval = epoch: the run's 3 epochs" \
  -- train "$T/sched.ini" --out "$T/s4" --set cosine.interval=epoch
expect 0 'note: --set cosine.T_max=100: cosine.T_max = 100 is past the run.s length: the scheduler steps 12 times' \
  "a T_max past the run's length is noted at start" \
  -- train "$T/sched.ini" --out "$T/s5" --set cosine.T_max=100
expect 2 'option step_lr.step_size: expected an integer, got "auto"' \
  "auto where an option does not take it is refused" \
  -- train "$T/sched.ini" --out "$T/s6" --set plugins.scheduler=step_lr --set step_lr.step_size=auto
expect 0 'linear_warmup: total_iters = auto = 3 \(the run.s epochs' \
  "linear_warmup's total_iters takes auto (its default interval is epoch: 3)" \
  -- train "$T/sched.ini" --out "$T/s7" --set plugins.scheduler=linear_warmup --set linear_warmup.total_iters=auto
expect 0 'onecycle: total_steps = auto = 12 ' "onecycle's total_steps defaults to auto" \
  -- train "$T/sched.ini" --out "$T/s8" --set plugins.scheduler=onecycle --set onecycle.max_lr=0.2 \
  --set onecycle.cycle_momentum=false
expect 2 'set total_steps = 0 \(torch.s None\) to use epochs \* steps_per_epoch' \
  "... and refuses epochs and steps_per_epoch beside it, which it would override" \
  -- train "$T/sched.ini" --out "$T/s9" --set plugins.scheduler=onecycle --set onecycle.max_lr=0.2 \
  --set onecycle.cycle_momentum=false --set onecycle.epochs=3 --set onecycle.steps_per_epoch=4

# A warm-up then cosine: each child its part of the run, split at the
# milestone.
config seq <<INI
[loop]
max_epochs = 3
[plugins]
step = linreg
optimizer = sgd
data = synthetic
scheduler = lrs:sequential
[synthetic]
n_train = 32
n_val = 0
n_test = 0
batch_size = 8
[sgd]
lr = 0.1
[lrs]
schedulers = warm:linear_warmup, main:cosine
milestones = 4
interval = step
[warm]
total_iters = auto
INI
"$LOOPKIT" train "$T/seq.ini" --out "$T/q1" >"$T/train.out" 2>&1
check "sequential: the warm-up's total_iters = auto is its milestone, 4" \
  grep -q 'warm:linear_warmup: total_iters = auto = 4 (its part of lrs:sequential.s 12, from 0 to 4)' "$T/train.out"
check "... and the cosine's T_max the rest of the run, 8" \
  grep -q 'main:cosine: T_max = auto = 8 (its part of lrs:sequential.s 12, from 4 to 12)' "$T/train.out"
check "... both in config.ini" sh -c "grep -qx 'total_iters = 4' '$T/q1/config.ini' && grep -qx 'T_max = 8' '$T/q1/config.ini'"

# Without data: max_steps.
config nodata <<INI
[loop]
max_steps = 7
[plugins]
step = rosenbrock
optimizer = sgd
scheduler = cosine
[sgd]
lr = 0.0001
[cosine]
interval = step
INI
expect 0 'cosine: T_max = auto = 7 ' "without data: max_steps" -- train "$T/nodata.ini" --out "$T/n1"
expect 2 'cosine.T_max = auto: the run has no epochs' "... and refused at interval = epoch, which never steps" \
  -- train "$T/nodata.ini" --out "$T/n2" --set cosine.interval=epoch

# Resume: the resumed run counts the same length, from the config or from
# the run directory's config.ini (which has the number).
sed -e 's/^max_epochs = 3$/max_epochs = 3\ncheckpoint_every_n_steps = 3/' \
  -e 's/^scheduler = cosine$/scheduler = cosine\nprofiler = killer/' "$T/sched.ini" >"$T/kill.ini"
train "$T/kill.ini" --out "$T/k-ref"
LK_KILL=checkpoint_save/end:2 train "$T/kill.ini" --out "$T/k1"
check "killed after its second checkpoint (step 6 of 12)" same "$(steps "$T/k1")" 6
train "$T/kill.ini" --resume "$T/k1/checkpoints/last.ckpt"
check "... resumed from the config: the same bits and metrics.csv as the uninterrupted run" \
  sh -c "cmp -s '$T/k-ref/metrics.csv' '$T/k1/metrics.csv' && cmp -s '$T/k-ref/checkpoints/last.ckpt' '$T/k1/checkpoints/last.ckpt'"
LK_KILL=checkpoint_save/end:2 train "$T/kill.ini" --out "$T/k2"
"$LOOPKIT" train --resume "$T/k2" --quiet >"$T/train.out" 2>&1
check "... and from the run directory (config.ini's T_max = 12)" \
  sh -c "cmp -s '$T/k-ref/metrics.csv' '$T/k2/metrics.csv' && cmp -s '$T/k-ref/checkpoints/last.ckpt' '$T/k2/checkpoints/last.ckpt'"

# ---- 3. one context length; text reads several files ----

mkdir "$T/corpus"
awk 'BEGIN { for (i = 0; i < 40; i++) printf "line %d of the first file, some text to read\n", i }' >"$T/corpus/a.txt"
awk 'BEGIN { for (i = 0; i < 40; i++) printf "and line %d of the second one, other words\n", i }' >"$T/corpus/b.txt"
a_bytes=$(wc -c <"$T/corpus/a.txt" | tr -d ' ')
b_bytes=$(wc -c <"$T/corpus/b.txt" | tr -d ' ')
config lm <<INI
[loop]
max_steps = 3
[plugins]
step = gpt
optimizer = adamw
data = text
[text]
path = corpus/a.txt, corpus/b.txt
batch_size = 2
val_split = 0
[gpt]
n_layer = 1
n_head = 2
n_embd = 16
block_size = 16
INI
expect 0 'text: block_size = auto = 16 \(the model gpt.s block_size\)' \
  "text.block_size defaults to the model's (gpt's block_size = 16)" -- train "$T/lm.ini" --out "$T/l1"
check "... and config.ini records it under [text]" \
  sh -c "awk '/^\[/ { s = \$0 } s == \"[text]\" && /^block_size = 16$/' '$T/l1/config.ini' | grep -q ."
check "... the paths relative to the config's directory, listed in order" \
  grep -qx "path = $T/corpus/a.txt,$T/corpus/b.txt" "$T/l1/config.ini"
expect 2 'block_size = 16, but the data.s samples are 32 tokens long' \
  "a text.block_size the model cannot take stays an error" -- train "$T/lm.ini" --out "$T/l2" --set text.block_size=32
expect 0 "text: $((a_bytes + b_bytes)) bytes from " "two files are read as one: every byte of both" \
  -- train "$T/lm.ini" --out "$T/l3"
expect 0 "text: $((a_bytes + b_bytes + 1)) bytes from " "separator = 10: a byte between them" \
  -- train "$T/lm.ini" --out "$T/l4" --set text.separator=10
expect 2 "vocab_size = 200, but the data.s tokens go up to 255" \
  "... the separator's byte is in the data (255, past a vocab_size of 200)" \
  -- train "$T/lm.ini" --out "$T/l5" --set text.separator=255 --set gpt.vocab_size=200
train "$T/lm.ini" --out "$T/l6" --set "text.path=$T/corpus/*.txt"
check "a shell pattern reads its matches in sorted order: the same run as a.txt, b.txt" \
  cmp -s "$T/l1/checkpoints/last.ckpt" "$T/l6/checkpoints/last.ckpt"
train "$T/lm.ini" --out "$T/l7" --set "text.path=$T/corpus/b.txt,$T/corpus/a.txt"
check "... and the order given matters (b.txt, a.txt is another run)" \
  sh -c "! cmp -s '$T/l1/checkpoints/last.ckpt' '$T/l7/checkpoints/last.ckpt'"
expect 2 "path: no file matches $T/corpus/none\*.txt" "a pattern that matches nothing is refused" \
  -- train "$T/lm.ini" --out "$T/l8" --set "text.path=$T/corpus/none*.txt"
expect 2 "option text.block_size = auto.*the model \(step plugin mlp\) has no integer option block_size to take it from" \
  "block_size = auto with a model that declares no context is refused, naming both" \
  -- train "$T/lm.ini" --out "$T/l9" --set plugins.step=mlp

# A sequential net over tokens (an embedding first: per position, the
# next token's logits) declares its context as gpt does, with block_size.
config seqlm <<INI
[loop]
max_steps = 3
[plugins]
step = sequential
optimizer = adamw
data = text
[text]
path = corpus/a.txt
batch_size = 2
val_split = 0.2
batches_per_epoch = 3
[sequential]
layers = embedding(128, 8), relu, linear(128)
block_size = 12
INI
expect 0 'text: block_size = auto = 12 \(the model sequential.s block_size\)' \
  "text.block_size defaults to a sequential net's (block_size = 12, an embedding first)" \
  -- train "$T/seqlm.ini" --out "$T/sq1"
check "... config.ini records it under [text]" \
  sh -c "awk '/^\[/ { s = \$0 } s == \"[text]\" && /^block_size = 12$/' '$T/sq1/config.ini' | grep -q ."
check "... and the net trains as a language model: val_ppl beside val_loss" \
  sh -c "head -1 '$T/sq1/metrics.csv' | tr , '\n' | grep -qx val_ppl"
check "... and loopkit generate samples from it, a longer prompt cropped to its last 12 tokens" \
  sh -c "'$LOOPKIT' generate '$T/seqlm.ini' --ckpt '$T/sq1/checkpoints/last.ckpt' --tokens 5 \
    --prompt 'line 1 of the first file, ' 2>/dev/null | wc -c | grep -qx 31"
expect 2 'a context of 6 tokens: the net takes 12 \(its block_size' \
  "... a prompt shorter than the net's tokens refused, saying so" \
  -- generate "$T/seqlm.ini" --ckpt "$T/sq1/checkpoints/last.ckpt" --tokens 5 --prompt "line 1"
expect 2 'block_size = 12, but the data.s samples are 16 tokens long' \
  "a text.block_size the sequential net does not declare is refused, naming both" \
  -- train "$T/seqlm.ini" --out "$T/sq2" --set text.block_size=16
expect 2 'option text.block_size = auto: the model \(step plugin sequential\) declares none \(block_size = 0.*give sequential.block_size or text.block_size a number' \
  "a sequential net that declares no length (block_size = 0) leaves text's to the config, saying so" \
  -- train "$T/seqlm.ini" --out "$T/sq3" --set sequential.block_size=0
expect 0 'trained 3 steps' "... and with text.block_size given, the net takes that length" \
  -- train "$T/seqlm.ini" --out "$T/sq4" --set sequential.block_size=0 --set text.block_size=16
expect 2 'the data.s samples are tokens, i32 \[12\]: the first layer must be embedding' \
  "token samples into a net without an embedding first are refused" \
  -- train "$T/seqlm.ini" --out "$T/sq5" --set "sequential.layers=linear(128)" --set text.block_size=12 --set sequential.block_size=0
expect 2 'num_embeddings = 100, but the data.s tokens go up to 1[0-9][0-9]' \
  "an embedding smaller than the data's tokens is refused" \
  -- train "$T/seqlm.ini" --out "$T/sq6" --set "sequential.layers=embedding(100, 8), linear(128)"

# ---- 4. defaults that cannot train silently wrong ----

config nolr <<INI
[loop]
max_steps = 3
[plugins]
step = rosenbrock
optimizer = sgd
[sgd]
momentum = 0.9
INI
expect 2 'plugin sgd: missing required option "lr" .*set it under \[sgd\]' \
  "sgd without lr is refused, as torch's SGD (lr=required), naming the option and the section" \
  -- train "$T/nolr.ini" --out "$T/nolr"
check "... and nothing is trained (no run directory)" test ! -e "$T/nolr"
expect 0 'trained 3 steps' "... given one, it trains" -- train "$T/nolr.ini" --out "$T/nolr2" --set sgd.lr=0.0001

# ---- 5. validation within an epoch: [loop] val_check_interval ----

# 8 steps an epoch; a validation after steps 3 and 6 of each, and the
# epoch's own after step 8.
config valcheck <<INI
[loop]
max_epochs = 2
val_check_interval = 3
checkpoint_every_n_steps = 2
[plugins]
step = linreg
optimizer = sgd
data = synthetic
profiler = killer
[synthetic]
n_train = 64
n_val = 16
n_test = 8
batch_size = 8
[sgd]
lr = 0.05
INI
# val_steps DIR: the steps of metrics.csv's validation rows.
val_steps() {
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "val_loss") k = i; next }
    $k != "" { printf "%s ", $1 }' "$1/metrics.csv"
}
train "$T/valcheck.ini" --out "$T/vc"
check "val_check_interval = 3: validations after steps 3 and 6 of each epoch, and at its end" \
  same "$(val_steps "$T/vc")" "3 6 8 11 14 16 "
train "$T/valcheck.ini" --out "$T/vc2" --set loop.val_every_n_epochs=2
check "... only in the epochs val_every_n_epochs validates" same "$(val_steps "$T/vc2")" "11 14 16 "
train "$T/valcheck.ini" --out "$T/vc3" --set loop.accumulate_grad_batches=2 --set loop.val_check_interval=2
check "... counting optimizer steps: with accumulation 2, after every 2nd of the 4 an epoch" \
  same "$(val_steps "$T/vc3")" "2 4 6 8 "
for kill in validation:2 validation/end:4 validation:5 checkpoint_save/end:3 optimizer_step:10; do
  rm -rf "$T/vck"
  LK_KILL=$kill train "$T/valcheck.ini" --out "$T/vck"
  train "$T/valcheck.ini" --resume "$T/vck/checkpoints/last.ckpt"
  check "killed at $kill and resumed: the same bits and metrics.csv rows as the uninterrupted run" \
    sh -c "cmp -s '$T/vc/metrics.csv' '$T/vck/metrics.csv' && cmp -s '$T/vc/checkpoints/last.ckpt' '$T/vck/checkpoints/last.ckpt'"
done
expect 0 'trained [0-9]+ steps' "early_stopping acts on a validation within an epoch" \
  -- train "$T/valcheck.ini" --out "$T/vces" --set plugins.callbacks=early_stopping \
  --set early_stopping.mode=max --set early_stopping.patience=1 --quiet
check "... and stops after the second (step 6), in epoch 0" same "$(val_steps "$T/vces")" "3 6 "
expect 2 'val_check_interval = 5 without a data plugin: there is no validation split' \
  "without a data plugin it is refused" -- train "$T/nodata.ini" --out "$T/vcn" --set loop.val_check_interval=5

# ---- 6. metrics users read: top-k accuracy, macro F1, perplexity ----

# iris: 120 rows to train on, 30 to test; macro F1 and top-2 accuracy of
# the test split held against the predictions loopkit predict writes,
# scored here in python3 (sklearn's definitions: the mean F1 of the
# classes that occur as a label or a prediction).
awk -F, 'NR > 1 && NF == 5 { if (NR % 5 == 0) print > "'"$T"'/iris-test.csv"; else print > "'"$T"'/iris-train.csv" }' \
  "$LK_SRCDIR/tests/data/sklearn-iris.csv"
config iris <<INI
[loop]
max_epochs = 2
seed = 3
[plugins]
step = mlp
optimizer = sgd
data = csv
[csv]
path = iris-train.csv
test = iris-test.csv
header = false
val_split = 0.25
batch_size = 4
[mlp]
layers = 4,8,3
top_k = 2
f1 = true
[sgd]
lr = 0.05
INI
train "$T/iris.ini" --out "$T/ir"
check "top_k = 2, f1 = true: metrics.csv has acc_top2 and val_/test_ acc_top2 and f1" \
  sh -c "head -1 '$T/ir/metrics.csv' | grep -qx 'step,epoch,loss,acc,acc_top2,val_loss,val_acc,val_acc_top2,val_f1,test_loss,test_acc,test_acc_top2,test_f1'"
"$LOOPKIT" test "$T/iris.ini" --ckpt "$T/ir/checkpoints/last.ckpt" >"$T/ir.test" 2>&1
"$LOOPKIT" predict "$T/iris.ini" --ckpt "$T/ir/checkpoints/last.ckpt" -o "$T/ir.pred" >/dev/null 2>&1
cat >"$T/score.py" <<'PY'
import sys
pred = [l.strip().split(",") for l in open(sys.argv[1])][1:]
labels = [int(float(l.strip().split(",")[-1])) for l in open(sys.argv[2]) if l.strip()]
got = dict(l.split() for l in open(sys.argv[3]) if l.startswith("test_"))
assert len(pred) == len(labels), (len(pred), len(labels))
f1s = []
for c in range(3):
    tp = sum(int(p[1]) == c and y == c for p, y in zip(pred, labels))
    fp = sum(int(p[1]) == c and y != c for p, y in zip(pred, labels))
    fn = sum(int(p[1]) != c and y == c for p, y in zip(pred, labels))
    if tp + fp + fn:
        f1s.append(2 * tp / (2 * tp + fp + fn))
top2 = sum(sorted(range(3), key=lambda c: -float(p[2 + c]))[:2].count(y)
           for p, y in zip(pred, labels)) / len(labels)
f1 = sum(f1s) / len(f1s)
ok = abs(f1 - float(got["test_f1"])) < 1e-12 and abs(top2 - float(got["test_acc_top2"])) < 1e-12
print("f1 %r top2 %r; loopkit %s %s" % (f1, top2, got["test_f1"], got["test_acc_top2"]))
sys.exit(0 if ok else 1)
PY
check "test_f1 is the macro F1 of the whole split, test_acc_top2 the top-2 accuracy, as the predictions give them" \
  python3 "$T/score.py" "$T/ir.pred" "$T/iris-test.csv" "$T/ir.test"
expect 2 'top_k = 4, but the model has 3 classes' "top_k larger than the classes is refused" \
  -- train "$T/iris.ini" --out "$T/ir2" --set mlp.top_k=4
train "$T/iris.ini" --out "$T/ir3" --set plugins.loggers=tensorboard
check "... and every logger gets them (tensorboard: val_f1, test_acc_top2)" \
  sh -c "python3 '$LK_SRCDIR/tests/cli/tfevents.py' '$T'/ir3/events.out.tfevents.* >'$T/ev' && grep -q 'val_f1' '$T/ev' && grep -q 'test_acc_top2' '$T/ev' &&
    python3 '$LK_SRCDIR/tests/cli/tfevents.py' '$T'/ir3/events.out.tfevents.* --rows '$T/ir3/metrics.csv'"

# A language model: val_ppl, exp of the mean val_loss (of the whole split).
"$LOOPKIT" train "$T/lm.ini" --out "$T/pp" --quiet --set text.val_split=0.3 \
  --set text.batches_per_epoch=3 >/dev/null 2>&1
check "gpt: val_ppl beside val_loss, exp(val_loss)" \
  sh -c "awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if (\$i == \"val_loss\") l = i; if (\$i == \"val_ppl\") p = i }; next }
    l && p && \$l != \"\" { n++; d = exp(\$l) / \$p - 1; if (d > 1e-12 || d < -1e-12) bad = 1 }
    END { exit !(n >= 1 && !bad) }' '$T/pp/metrics.csv'"

finish

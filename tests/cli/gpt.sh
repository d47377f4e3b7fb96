#!/bin/sh
# The gpt model and the text data plugin through the command, on a small
# corpus written here (3000 lines of "N: the cat sat on the mat."): a tiny
# GPT learns it (the loss falls far below ln(256) = 5.55), its parameters
# carry nanoGPT's names, gradcheck agrees with backward, generate samples
# from it (the same seed, the same text) and refuses what it cannot do,
# the text plugin's windows, epochs and errors, and the run's determinism:
# bit for bit from run to run, across thread counts, and resumed with
# dropout. tests/test_gpt.c checks the values against torch.
. "$LK_SRCDIR/tests/cli/lib.sh"
cd "$T" || exit 1

awk 'BEGIN { for (i = 0; i < 3000; i++) printf "%d: the cat sat on the mat.\n", (i * 7) % 97 }' >corpus.txt
gzip -c corpus.txt >corpus.txt.gz
size=$(wc -c <corpus.txt)

# tiny NAME [LINE...]: a 2-layer GPT 32 wide on the corpus, 4 epochs of 50
# batches of 8 x 16 bytes; LINEs (other keys) go at the end of [gpt].
tiny() {
  name=$1
  shift
  {
    printf '[loop]\nmax_epochs = 4\nthreads = 1\nseed = 7\n'
    printf '[plugins]\nstep = gpt\ndata = text\noptimizer = adamw\n'
    printf '[text]\npath = %s/corpus.txt\nblock_size = 16\nbatch_size = 8\n' "$T"
    printf 'batches_per_epoch = 50\nval_batches = 8\n[adamw]\nlr = 0.01\n'
    printf '[gpt]\nn_layer = 2\nn_head = 2\nn_embd = 32\nblock_size = 16\n'
    printf '%s\n' "$@"
  } >"$name.ini"
}

# Under valgrind or the sanitizers the model trains 4 epochs of 5 steps,
# not of 50, and what needs it learnt is skipped.
heavy=yes
[ -n "${LK_LOOPKIT:-}" ] || [ -n "${LK_SANITIZE:-}" ] && heavy=no
skip() { ok "$1 # SKIP under valgrind or the sanitizers (minutes)"; }

# ---- training -------------------------------------------------------------
tiny tiny
per=50
[ $heavy = yes ] || per=5
expect 0 "trained $((4 * per)) steps \\(4 epochs\\)" "a tiny GPT trains 4 epochs of $per steps" \
  -- train tiny.ini --out r-tiny --quiet --set text.batches_per_epoch=$per
val=$(awk -F, 'NR > 1 && $4 != "" { v = $4 } END { print v }' r-tiny/metrics.csv)
if [ $heavy = yes ]; then
  check "the validation loss falls below 1 (from ln 256 = 5.55): $val" \
    awk -v v="$val" 'BEGIN { exit !(v + 0 > 0 && v + 0 < 1) }'
else
  skip "the validation loss falls below 1"
fi
first=$(awk -F, 'NR == 2 { print $3 }' r-tiny/metrics.csv)
check "the first step's loss is near ln(256) at nanoGPT's init: $first" \
  awk -v v="$first" 'BEGIN { exit !(v > 5.3 && v < 5.8) }'
check "four validations, one an epoch" \
  test "$(awk -F, 'NR > 1 && $4 != ""' r-tiny/metrics.csv | wc -l)" -eq 4

# ---- parameters -------------------------------------------------------------
"$LOOPKIT" dump r-tiny/checkpoints/last.ckpt | sed 's/\[.*//' | uniq >names
check "dump: nanoGPT's state_dict names, in its order, lm_head tied (absent)" \
  sh -c "head -3 names | tr '\n' ' ' | grep -qx 'transformer.wte.weight transformer.wpe.weight transformer.h.0.ln_1.weight '"
for p in transformer.h.1.attn.c_attn.weight transformer.h.1.attn.c_attn.bias \
  transformer.h.1.attn.c_proj.weight transformer.h.1.ln_2.bias \
  transformer.h.1.mlp.c_fc.weight transformer.h.1.mlp.c_proj.bias \
  transformer.ln_f.weight transformer.ln_f.bias; do
  check "dump names $p" grep -qx "$p" names
done
check "26 parameters (2 embeddings, 12 per block, ln_f's 2), no lm_head" \
  sh -c "test \$(wc -l <names) -eq 28 && ! grep -q lm_head names"
check "c_attn.weight is [3C, C] = 96 x 32 values" \
  sh -c "\"$LOOPKIT\" dump r-tiny/checkpoints/last.ckpt | grep -c '^transformer.h.0.attn.c_attn.weight\\[' | grep -qx 3072"
tiny nobias 'bias = false'
expect 0 'trained' "bias = false trains" -- train nobias.ini --out r-nobias --quiet --set loop.max_epochs=1 --set text.batches_per_epoch=5
check "bias = false: no bias parameters" \
  sh -c "! \"$LOOPKIT\" dump r-nobias/checkpoints/last.ckpt | grep -q bias"

# ---- init from a safetensors file ---------------------------------------------
# The trained parameters, from dump, as torch would save the model's
# state_dict (lm_head.weight, the tied head, included).
"$LOOPKIT" dump r-tiny/checkpoints/last.ckpt >tiny.dump
cat >st.py <<'PY'
import json, struct, sys
C, V, T = 32, 256, 16
shapes = {"wte.weight": [V, C], "lm_head.weight": [V, C], "wpe.weight": [T, C], "c_attn.weight": [3 * C, C],
          "c_attn.bias": [3 * C], "attn.c_proj.weight": [C, C],
          "c_fc.weight": [4 * C, C], "c_fc.bias": [4 * C], "mlp.c_proj.weight": [C, 4 * C]}
vals = {}
for line in open(sys.argv[1]):
    key, v = line.split()
    name = key[:key.index("[")]
    vals.setdefault(name, []).append(float(v))
drop = sys.argv[3] if len(sys.argv) > 3 else None
if drop:
    del vals[drop]
vals["lm_head.weight"] = vals["transformer.wte.weight"]
head, blobs, off = {}, [], 0
for name, v in vals.items():
    shape = next((s for k, s in shapes.items() if name.endswith(k)), [C])
    b = struct.pack("<%df" % len(v), *v)
    head[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(b)]}
    off += len(b)
    blobs.append(b)
h = json.dumps(head).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
PY
python3 st.py tiny.dump tiny.safetensors
python3 st.py tiny.dump less.safetensors transformer.h.1.ln_2.bias
expect 0 'trained 1 steps' "init = FILE.safetensors, lm_head.weight in it ignored" \
  -- train tiny.ini --out r-init --quiet --set "gpt.init=$T/tiny.safetensors" \
  --set loop.max_steps=1 --set adamw.lr=0
"$LOOPKIT" dump r-init/checkpoints/last.ckpt >init.dump
check "init: the file's values, bit for bit (a step at lr 0 changes nothing)" \
  cmp -s tiny.dump init.dump
expect 2 'transformer.h.1.ln_2.bias' "init: a file without a parameter is refused, naming it" \
  -- train tiny.ini --out r-less --set "gpt.init=$T/less.safetensors"

# ---- gradcheck --------------------------------------------------------------
# f32 central differences of a loss near 5.5 resolve a gradient to about
# 1e-2 of its size at nanoGPT's small init; a wrong one is off by far more.
small="--set gpt.n_embd=16 --set gpt.block_size=8 --set text.block_size=8 --set text.batch_size=2"
# shellcheck disable=SC2086
expect 0 'transformer.h.1.mlp.c_proj.weight' "gradcheck on a tiny GPT, within 0.1" \
  -- gradcheck tiny.ini $small --batches 1 --samples 8 --tolerance 0.1
# shellcheck disable=SC2086
expect 0 'transformer.ln_f.weight' "gradcheck with bias = false, within 0.1" \
  -- gradcheck tiny.ini $small --set gpt.bias=false --batches 1 --samples 8 \
  --tolerance 0.1

# ---- generate ---------------------------------------------------------------
CK=r-tiny/checkpoints/last.ckpt
gen() { "$LOOPKIT" generate tiny.ini --ckpt "$CK" "$@"; }
gen --prompt '12: the ' --tokens 200 --seed 3 >g1 2>&1
gen --prompt '12: the ' --tokens 200 --seed 3 >g2 2>&1
gen --prompt '12: the ' --tokens 200 --seed 4 >g3 2>&1
check "generate: the same seed writes the same text" cmp -s g1 g2
check "generate: another seed, another text" sh -c '! cmp -s g1 g3'
check "generate: the prompt, then 200 bytes" \
  sh -c "test \$(wc -c <g1) -eq 208 && head -c 8 g1 | grep -qx '12: the '"
if [ $heavy = yes ]; then
  check "generate: the model has learnt the corpus's lines" \
    grep -q 'cat sat on the mat' g1
else
  skip "generate: the model has learnt the corpus's lines"
fi
gen --prompt 'x' --tokens 40 --temperature 0 --seed 1 >t1
gen --prompt 'x' --tokens 40 --temperature 0 --seed 2 >t2
check "generate: temperature 0 takes the most likely token, whatever the seed" cmp -s t1 t2
gen --tokens 0 --prompt 'abc' >z
check "generate: --tokens 0 prints the prompt alone" sh -c "test \"\$(cat z)\" = abc"
expect 0 "$([ $heavy = yes ] && echo 'the mat' || echo .)" \
  "generate: past block_size the context is cropped (100 tokens, block 16)" \
  -- generate tiny.ini --ckpt "$CK" --tokens 100 --top-k 1
expect 0 'the' "generate: --set applies (two threads, the same model)" \
  -- generate tiny.ini --ckpt "$CK" --tokens 20 --set loop.threads=2 --prompt 'the '

expect 2 'no --ckpt' "generate: --ckpt is required" -- generate tiny.ini
expect 2 'generate: --prompt is empty' "generate: an empty prompt is refused" \
  -- generate tiny.ini --ckpt "$CK" --prompt ''
expect 2 '--temperature "-1": expected a number >= 0' "generate: a negative temperature" \
  -- generate tiny.ini --ckpt "$CK" --temperature -1
expect 2 '--tokens "many": expected a whole number' "generate: tokens must be a number" \
  -- generate tiny.ini --ckpt "$CK" --tokens many
expect 2 "--tokens 9223372036854775807: more than this machine can hold" \
  "generate: a context that could not be held is refused" \
  -- generate tiny.ini --ckpt "$CK" --tokens 9223372036854775807
expect 2 "nowhere.ckpt: no such checkpoint" "generate: a missing checkpoint is named" \
  -- generate tiny.ini --ckpt nowhere.ckpt
expect 2 "$CK: parameter transformer.wte.weight is f32\\[256,32\\] there but f32\\[256,64\\] in this config's model \\(gpt\\)" \
  "generate: a checkpoint of another shape names the parameter and both shapes" \
  -- generate tiny.ini --ckpt "$CK" --set gpt.n_embd=64
expect 2 "has no parameter transformer.h.2.ln_1.weight" \
  "generate: a checkpoint with fewer layers names the missing parameter" \
  -- generate tiny.ini --ckpt "$CK" --set gpt.n_layer=3
expect 2 "holds parameter transformer.h.0.ln_1.bias, which this config's model \\(gpt\\) does not have" \
  "generate: a checkpoint with more parameters names the extra one" \
  -- generate tiny.ini --ckpt "$CK" --set gpt.bias=false
config rosen <<INI
[loop]
max_steps = 1
[plugins]
step = rosenbrock
optimizer = sgd
[sgd]
lr = 0.001
INI
"$LOOPKIT" train rosen.ini --out r-rosen --quiet >/dev/null 2>&1
expect 2 "plugin rosenbrock \\(the step\\) has no predict_step" \
  "generate: a step plugin without predict_step is named" \
  -- generate rosen.ini --ckpt r-rosen/checkpoints/last.ckpt
tiny small 'vocab_size = 120'
"$LOOPKIT" train small.ini --out r-small --quiet --set loop.max_steps=2 >/dev/null 2>&1
expect 2 "x: token 200 at \\[0, 1\\] is out of range: vocab_size = 120" \
  "generate: a prompt byte outside the vocabulary is named" \
  -- generate small.ini --ckpt r-small/checkpoints/last.ckpt --prompt "$(printf 'a\310')"

# ---- the model's options ------------------------------------------------------
expect 2 'n_embd = 30 is not a multiple of n_head = 4' "n_embd not a multiple of n_head names both" \
  -- train tiny.ini --out r-heads --set gpt.n_embd=30 --set gpt.n_head=4
expect 2 'block_size = 8, but the data.s samples are 16 tokens long' \
  "a model block shorter than the data's names both" \
  -- train tiny.ini --out r-block --set gpt.block_size=8
expect 2 "vocab_size = 100, but the data's tokens go up to 116" \
  "a vocabulary smaller than the data's bytes names both" \
  -- train tiny.ini --out r-vocab --set gpt.vocab_size=100
expect 2 'option gpt.dropout = 1: must be >= 0 and < 1' "dropout must be below 1" \
  -- train tiny.ini --out r-drop --set gpt.dropout=1
expect 2 'option gpt.n_layer = 0: must be >= 1 and <= 1024' "n_layer's range" \
  -- train tiny.ini --out r-layers --set gpt.n_layer=0

# ---- the text plugin --------------------------------------------------------
expect 0 "$size bytes from $T/corpus.txt: $((size - size / 10)) for training \\(50 batches an epoch\\), $((size / 10)) for validation \\(64 windows of 17\\)" \
  "text: the log says the parts, the epoch and the validation windows" \
  -- train tiny.ini --out r-log --set loop.max_epochs=1 --set loop.max_steps=5
expect 0 "for training \\($(((size - size / 10) / 128)) batches an epoch\\).*\\($(((size / 10 - 1) / 16)) windows of 17\\)" \
  "text: by default an epoch is train bytes / (batch x block), validation every window" \
  -- train tiny.ini --out r-epoch --set loop.max_epochs=1 --set loop.max_steps=3 \
  --set text.batches_per_epoch=0 --set text.val_batches=0
expect 0 "$size bytes from $T/corpus.txt.gz" "text: a gzipped file reads as the plain one" \
  -- train tiny.ini --out r-gz --set loop.max_epochs=1 --set loop.max_steps=5 \
  --set "text.path=$T/corpus.txt.gz"
"$LOOPKIT" dump r-log/checkpoints/last.ckpt >plain.dump
"$LOOPKIT" dump r-gz/checkpoints/last.ckpt >gz.dump
check "text: gzipped or not, the same run bit for bit" cmp -s plain.dump gz.dump
expect 0 'trained 5 steps' "text: val_split = 0, no validation" \
  -- train tiny.ini --out r-noval --set loop.max_epochs=1 --set text.val_split=0 \
  --set text.batches_per_epoch=5
check "text: no val_loss without a validation part" \
  sh -c "! grep -q val_loss r-noval/metrics.csv"
head -c 17 corpus.txt >w17.txt
expect 0 'trained 3 steps.*' "text: a file of exactly block_size + 1 bytes has one window" \
  -- train tiny.ini --out r-w17 --set loop.max_epochs=1 --set loop.max_steps=3 \
  --set "text.path=$T/w17.txt" --set text.val_split=0
head -c 16 corpus.txt >w16.txt
expect 2 "$T/w16.txt has 16 bytes: its training part \\(16 bytes\\) is shorter than one window of block_size \\+ 1 = 17 bytes" \
  "text: a file shorter than a window names the file and the sizes" \
  -- train tiny.ini --out r-w16 --set "text.path=$T/w16.txt" --set text.val_split=0
head -c 20 corpus.txt >w20.txt
expect 2 "$T/w20.txt has 20 bytes: its training part \\(2 bytes, the rest is val_split's\\) is shorter than one window" \
  "text: a training part too short once validation is held out" \
  -- train tiny.ini --out r-w20 --set "text.path=$T/w20.txt" --set text.val_split=0.9
expect 2 "corpus.txt has $size bytes: val_split = 0.0001 gives a validation part of 8 bytes, shorter than one window" \
  "text: a validation part shorter than a window names the split and sizes" \
  -- train tiny.ini --out r-vs --set text.val_split=0.0001
expect 2 "cannot open text file $T/none.txt" "text: a missing file is named" \
  -- train tiny.ini --out r-none --set "text.path=$T/none.txt"
head -c 400 corpus.txt.gz >cut.gz
expect 2 "$T/cut.gz is truncated: its gzip stream stops after [0-9]+ bytes" \
  "text: a cut gzip file is named" -- train tiny.ini --out r-cut --set "text.path=$T/cut.gz"
{ head -c 300 corpus.txt.gz; printf '%040d' 0; tail -c +341 corpus.txt.gz; } >bad.gz
expect 2 "$T/bad.gz: corrupt gzip data" "text: a damaged gzip file is named" \
  -- train tiny.ini --out r-bad --set "text.path=$T/bad.gz"
expect 2 'option text.val_split = 1: must be >= 0 and < 1' "text: val_split below 1" \
  -- train tiny.ini --out r-vs1 --set text.val_split=1

# ---- determinism ------------------------------------------------------------
if [ $heavy = no ]; then
  skip "determinism"
else
  tiny drop 'dropout = 0.1'
  short='--set text.batches_per_epoch=10'
  # shellcheck disable=SC2086
  "$LOOPKIT" train drop.ini --out r-d1 --quiet $short --set loop.threads=2 >/dev/null 2>&1
  "$LOOPKIT" train drop.ini --out r-d2 --quiet $short --set loop.threads=2 >/dev/null 2>&1
  "$LOOPKIT" train drop.ini --out r-d3 --quiet $short --set loop.threads=1 >/dev/null 2>&1
  "$LOOPKIT" dump r-d1/checkpoints/last.ckpt >d1
  "$LOOPKIT" dump r-d2/checkpoints/last.ckpt >d2
  "$LOOPKIT" dump r-d3/checkpoints/last.ckpt >d3
  check "two runs at 2 threads, dropout 0.1: the same weights bit for bit" cmp -s d1 d2
  check "and at 1 thread the same again" cmp -s d1 d3
  "$LOOPKIT" train tiny.ini --out r-d0 --quiet $short --set loop.threads=2 >/dev/null 2>&1
  "$LOOPKIT" dump r-d0/checkpoints/last.ckpt >d0
  check "dropout changes the run" sh -c '! cmp -s d0 d1'
  "$LOOPKIT" train drop.ini --out r-half --quiet $short --set loop.threads=2 \
    --set loop.max_epochs=2 >/dev/null 2>&1
  expect 0 'trained 40 steps' "resumed after 2 of 4 epochs, with dropout" \
    -- train drop.ini --resume r-half/checkpoints/last.ckpt --out r-resumed \
    --quiet $short --set loop.threads=2
  "$LOOPKIT" dump r-resumed/checkpoints/last.ckpt >dr
  check "the resumed run ends bit for bit where the straight one does" cmp -s d1 dr
  check "and its metrics rows are the straight run's" cmp -s r-d1/metrics.csv r-resumed/metrics.csv
fi
finish

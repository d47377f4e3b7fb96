#!/bin/sh
# Networks that branch, in sequential's one-line syntax: @NAME marks the
# current tensor, add(@NAME) and cat(@NAME) join a marked one to it, and a
# section's name used as a layer is that section's own layers list as a
# nested block (torch's names: 3.1.weight). The syntax's example (a ResNet
# basic block used twice) trains; a residual CNN matches torch's losses
# over 20 steps (tests/data/residual, written by tests/torch/residual.py);
# the errors exit 2 naming the layer and leave no run directory; cat's
# shape; the names in loopkit summary and an export; gradcheck.
. "$LK_SRCDIR/tests/cli/lib.sh"
cd "$T" || exit 1 # errors must leave no runs/ here
REF="$LK_SRCDIR/tests/data/residual"
ST="python3 $LK_SRCDIR/tests/cli/st_tool.py"

net() { # NAME BLOCKS LAYERS [EXTRA]: a config of sections BLOCKS then the net
  cat >"$T/$1.ini" <<INI
[loop]
max_steps = ${4:-2}
[plugins]
step = sequential
optimizer = sgd
data = idx
[idx]
dir = $REF
batch_size = 4
shuffle = false
normalize = scale
$2
[sequential]
layers = $3
[sgd]
lr = 0.01
momentum = 0.9
INI
}

# ---- 1. the syntax's example trains; its names ---------------------------

RES64='[res64]
layers = @in, conv2d(64, 3, padding=1, bias=false), batchnorm2d, relu, conv2d(64, 3, padding=1, bias=false), batchnorm2d, add(@in), relu'
net example "$RES64" 'conv2d(64, 3, padding=1), batchnorm2d, relu, res64, res64, maxpool2d(2), flatten, linear(10)'
expect 0 'trained 2 steps' "the ResNet example of the syntax trains" -- train "$T/example.ini" --out "$T/ex" --quiet
check "... its loss is finite" awk -F, 'NR > 1 && $3 != "" { n++; if ($3 + 0 != $3 + 0 || $3 == "nan") exit 1 } END { exit n != 2 }' "$T/ex/metrics.csv"
check "... config.ini records the block's section, so that it runs again" \
  grep -qx 'layers = @in, conv2d(64, 3, padding=1, bias=false), batchnorm2d, relu, conv2d(64, 3, padding=1, bias=false), batchnorm2d, add(@in), relu' "$T/ex/config.ini"
expect 0 'trained 2 steps' "... and it does" -- train "$T/ex/config.ini" --out "$T/ex2" --quiet
check "... to the same bits" sh -c "'$LOOPKIT' dump '$T/ex/checkpoints/last.ckpt' >'$T/d1' && '$LOOPKIT' dump '$T/ex2/checkpoints/last.ckpt' | cmp -s - '$T/d1'"
expect 0 ' 3\.1 +batchnorm2d +\[64, 8, 8\] +128 +129' "summary: a block's layers under torch's nested names" -- summary "$T/example.ini"
check "... 3.0 to 3.6 and 4.0 to 4.6, add among them" sh -c "grep -Eq ' 3\.5 +add +\[64, 8, 8\]' '$T/out' && grep -Eq ' 4\.6 +relu ' '$T/out' && grep -Eq ' 7 +linear +\[10\]' '$T/out'"
check "... every parameter once: 3.0.weight is a fresh copy of 4.0.weight's shape" \
  sh -c "'$LOOPKIT' dump '$T/ex/checkpoints/last.ckpt' | grep -c '^[34]\.0\.weight\[0\] ' | grep -qx 2"
expect 0 '' "export to safetensors" -- export "$T/ex/checkpoints/last.ckpt" -o "$T/ex.safetensors"
$ST tensors "$T/ex.safetensors" | cut -d' ' -f1-3 >"$T/names"
check "... named as torch's nested nn.Sequential: 3.1.weight" grep -qx '3\.1\.weight F32 64' "$T/names"
check "... 4.4.running_var and 3.0.weight, no bias in the block" \
  sh -c "grep -qx '4\.4\.running_var F32 64' '$T/names' && grep -qx '3\.0\.weight F32 64x64x3x3' '$T/names' && ! grep -q '^3\.0\.bias' '$T/names'"

# ---- 2. against torch: 20 steps of a residual CNN ------------------------

RES16='[res16]
layers = @in, conv2d(16, 3, padding=1, bias=false), batchnorm2d, relu, conv2d(16, 3, padding=1, bias=false), batchnorm2d, add(@in), relu'
net torch "$RES16" "conv2d(16, 3, padding=1), batchnorm2d, relu, res16, res16, maxpool2d(2), flatten, linear(10)
init = $REF/init.safetensors" 20
expect 0 'trained 20 steps' "the residual CNN trains 20 steps from torch's init" -- train "$T/torch.ini" --out "$T/tr" --quiet
awk -F, 'NR > 1 && $3 != "" { print $1, $3 }' "$T/tr/metrics.csv" >"$T/losses"
check "... its 20 losses are torch's to 1e-4" awk 'NR == FNR { if ($1 !~ /^#/) want[$1] = $2; next }
  { n++; d = $2 - want[$1]; d = d < 0 ? -d : d; if (!($1 in want) || d > 1e-4) { print "# step " $1 ": " $2 ", torch " want[$1]; bad++ } }
  END { exit bad > 0 || n != 20 }' "$REF/losses.txt" "$T/losses"

# ---- 3. cat, and gradients through add and cat ---------------------------

net cat '[mix]
layers = @a, conv2d(3, 3, padding=1), tanh, add(@a), @b, conv2d(2, 1), tanh, cat(@b), @c, linear(3), tanh, cat(@c)' \
  'conv2d(3, 3, stride=2), tanh, mix, flatten, linear(10)'
expect 0 ' 2\.5 +cat +\[5, 3, 3\]' "cat joins along dimension 1: [2, 3, 3] then [3, 3, 3]" -- summary "$T/cat.ini"
check "... of vectors' last size too, [5, 3, 3] twice" grep -Eq ' 2\.8 +cat +\[10, 3, 3\]' "$T/out"
check "... then flatten sees 90 values" grep -Eq ' 3 +flatten +\[90\]' "$T/out"
expect 0 '^gradcheck: passed' "gradcheck through add and cat, a marked tensor taken twice" -- gradcheck "$T/cat.ini"
check "... every parameter of the block reported" sh -c "grep -q '^2\.0\.weight ' '$T/out' && grep -q '^2\.3\.bias ' '$T/out' && grep -q '^2\.6\.weight ' '$T/out'"
net self '' '@x, conv2d(1, 3, padding=1), add(@x), @y, cat(@y), flatten, linear(10)'
expect 0 ' 1 +add +\[1, 8, 8\]' "add and cat of the data itself and of the tensor just marked" -- summary "$T/self.ini"
check "... cat of a tensor with itself: [2, 8, 8]" grep -Eq ' 2 +cat +\[2, 8, 8\]' "$T/out"
expect 0 '^gradcheck: passed' "... and gradcheck passes" -- gradcheck "$T/self.ini"

# A ReLU whose output is marked and taken by add stays a layer of its own:
# not folded into the max-pool after it (whose input would then be the
# ReLU's input). A second ReLU, which the max-pool takes in, gives the same
# values: the same losses to the bit.
net keep '' 'conv2d(2, 3, padding=1), relu, @r, maxpool2d(3, stride=1, padding=1), add(@r), flatten, linear(10)'
net fold '' 'conv2d(2, 3, padding=1), relu, @r, relu, maxpool2d(3, stride=1, padding=1), add(@r), flatten, linear(10)'
expect 0 'trained 2 steps' "a marked ReLU before a max-pool trains" -- train "$T/keep.ini" --out "$T/keep" --quiet
expect 0 'trained 2 steps' "... as does the same net with a ReLU to fold" -- train "$T/fold.ini" --out "$T/fold" --quiet
check "... the same losses: the marked ReLU was not folded" sh -c "cut -d, -f1,3 '$T/keep/metrics.csv' >'$T/l1' && cut -d, -f1,3 '$T/fold/metrics.csv' | cmp -s - '$T/l1'"
# resumed: the block's section comes back from config.ini
expect 0 'trained 4 steps' "a resumed branching net trains on" -- train "$T/ex/config.ini" --resume "$T/ex/checkpoints/last.ckpt" --set loop.max_steps=4 --quiet

# ---- 4. errors: exit 2, the layer's index and text, no run directory -----

refused() { # DESC PATTERN BLOCKS LAYERS
  net bad "$3" "$4"
  expect 2 "$2" "$1" -- train "$T/bad.ini"
}
refused "an unknown name" 'layers: layer 2 "add\(@b\)": no tensor marked @b before it in this list \(marked: @a\)' \
  '' '@a, conv2d(1, 3, padding=1), relu, add(@b), flatten, linear(10)'
refused "a name marked later" 'layers: layer 1 "add\(@a\)": no tensor marked @a before it in this list \(marked: none\)' \
  '' 'relu, add(@a), @a, flatten, linear(10)'
refused "a name marked in a block is local to it" 'layers: layer 2 "cat\(@in\)": no tensor marked @in' \
  "$RES16" 'conv2d(16, 3, padding=1), res16, cat(@in), flatten, linear(10)'
refused "a block does not see its caller's names" 'layers: layer 0 "blk": block \[blk\] \(.*bad\.ini:[0-9]+\): layers: layer 0\.0 "add\(@a\)": no tensor marked @a before it in this list \(marked: none\)' \
  '[blk]
layers = add(@a)' '@a, blk, flatten, linear(10)'
refused "a shape mismatch at add" 'layers: layer 0\.5 \(add "add\(@in\)" in block \[res16\]\): shapes \[16, 8, 8\] and \[1, 8, 8\] differ' \
  "$RES16" 'res16, flatten, linear(10)'
refused "a shape mismatch at cat" 'layers: layer 2 \(cat "cat\(@a\)"\): shapes \[4, 4, 4\] and \[1, 8, 8\]: cat joins tensors along dimension 1' \
  '' '@a, conv2d(4, 3, padding=1), maxpool2d(2), cat(@a), flatten, linear(10)'
refused "a block that uses itself" 'layers: layer 1 "loop1": block \[loop1\] \(.*\): layers: layer 1\.0 "loop1": block \[loop1\] uses itself: sequential -> loop1 -> loop1' \
  '[loop1]
layers = loop1, relu' 'relu, loop1, flatten, linear(10)'
refused "... or through another" 'block \[b1\] uses itself: sequential -> b1 -> b2 -> b1' \
  '[b1]
layers = relu, b2
[b2]
layers = b1' 'b1, flatten, linear(10)'
refused "the model's own section is no block" 'layers: layer 1 "sequential": unknown layer sequential' \
  '' 'relu, sequential'
refused "a section named as a layer type" 'layers: layer 1: "relu" is both the layer type relu and the section \[relu\] \(.*bad\.ini:[0-9]+\) with a layers list' \
  '[relu]
layers = tanh' 'flatten, relu, linear(10)'
refused "add without a marked tensor" 'layers: layer 1 "add": add joins a marked tensor to the current one: add\(@NAME\)' \
  '' 'flatten, add, linear(10)'
refused "a marked tensor given to a layer of one input" 'layers: layer 1 "relu\(@a\)": relu takes one input, the current tensor: no @NAME' \
  '' '@a, flatten, relu(@a), linear(10)'
refused "a malformed mark" 'layers: layer 1: "@a b": @NAME marks the current tensor' \
  '' 'flatten, @a b, linear(10)'
refused "a block's key other than layers" 'bad\.ini:[0-9]+: unknown key layer in section \[blk\], which a plugin reads as its own: accepted keys: layers' \
  '[blk]
layers = relu
layer = tanh' 'blk, flatten, linear(10)'
refused "an unused section is still unknown" 'unknown section \[spare\]: not a plugin named in \[plugins\]' \
  '[spare]
layers = relu' 'flatten, linear(10)'
check "no run directory was made" test ! -d "$T/runs"

finish

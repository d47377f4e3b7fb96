#!/bin/sh
# The C inference API (loopkit/infer.h) as a user has it: make install
# into a staging directory, examples/infer built with nothing but
# pkg-config loopkit, its predictions of Fashion-MNIST test images equal
# to the installed loopkit predict's (from a checkpoint and from an
# exported .safetensors), and the API's answers and refusals from a
# program built the same way.
. "$LK_SRCDIR/tests/cli/lib.sh"
: "${LK_BUILDDIR:?}"
D=$LK_SRCDIR/tests/data/npy

make -s -C "$LK_BUILDDIR" install DESTDIR="$T/root" >"$T/install.log" 2>&1
check "make install into a staging directory" test $? -eq 0
libdir=$(pkg-config --variable=libdir "$LK_BUILDDIR/loopkit.pc")
bindir=$(pkg-config --variable=exec_prefix "$LK_BUILDDIR/loopkit.pc")/bin
pluginsdir=$(pkg-config --variable=pluginsdir "$LK_BUILDDIR/loopkit.pc")
includedir=$(pkg-config --variable=includedir "$LK_BUILDDIR/loopkit.pc")
check "installed: loopkit/infer.h" test -f "$T/root$includedir/loopkit/infer.h"
mandir=$(sed -n 's/^mandir = //p' "$LK_BUILDDIR/Makefile")
mandir=$(echo "$mandir" | sed "s|\${datarootdir}|$(sed -n 's/^datarootdir = //p' "$LK_BUILDDIR/Makefile")|;s|\${prefix}|$(sed -n 's/^prefix = //p' "$LK_BUILDDIR/Makefile")|")
for f in lk_model_open lk_model_open_config lk_model_input_shape \
  lk_model_output_shape lk_model_forward lk_model_close; do
  check "installed: man3/$f.3, its own page" \
    sh -c "test -s '$T/root$mandir/man3/$f.3' && grep -q '^\.B.*$f\|$f' '$T/root$mandir/man3/$f.3'"
done

# The installed loopkit and plugins, and pkg-config on the staged tree.
installed() {
  LD_LIBRARY_PATH="$T/root$libdir" LOOPKIT_PLUGIN_PATH="$T/root$pluginsdir" "$@"
}
pc() {
  PKG_CONFIG_PATH="$T/root$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$T/root" "$@"
}
LK=$T/root$bindir/loopkit

cp -R "$LK_SRCDIR/examples/infer" "$T/infer"
chmod -R u+w "$T/infer"
rm -f "$T/infer/infer"
# (with the sanitizers' flags when the library has them, as expert.sh
# builds its programs: a program of an ASan library must load ASan first)
pc make -s -C "$T/infer" CC="${LK_CC:-cc} ${LK_SANITIZE:-}" >"$T/build.log" 2>&1
check "examples/infer builds with pkg-config loopkit only" test -x "$T/infer/infer"

# ---- the example on Fashion-MNIST ---------------------------------------
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  ok "examples/infer on Fashion-MNIST # SKIP dataset-fashion-mnist is not installed"
else
  config cnn <<INI
[loop]
max_steps = 20
seed = 0
[plugins]
step = sequential
optimizer = adam
data = idx
callbacks = checkpoint
[idx]
batch_size = 32
limit = 640
[sequential]
layers = conv2d(4, 3, padding=1), batchnorm2d, relu, maxpool2d(2), flatten, dropout(0.2), linear(10)
[adam]
lr = 0.01
INI
  installed "$LK" train "$T/cnn.ini" --out "$T/cnn" --quiet >"$T/train.out" 2>&1
  check "a tiny CNN (batch norm, dropout) trains 20 steps on Fashion-MNIST" \
    test -f "$T/cnn/checkpoints/last.ckpt"
  # predict in batches of 8, the example's 8 images in one forward: the
  # same arithmetic (the layer kit's sums may group with the batch).
  installed "$LK" predict "$T/cnn.ini" --ckpt "$T/cnn/checkpoints/last.ckpt" \
    --set idx.batch_size=8 2>"$T/err" |
    awk -F, 'NR > 1 && NR <= 9 { print $1, $2, $($2 + 3) }' >"$T/want"
  installed "$T/infer/infer" "$T/cnn.ini" "$T/cnn/checkpoints/last.ckpt" 8 \
    >"$T/ex.out" 2>&1
  check "examples/infer: exit 0" test $? -eq 0
  sed 's/^image \([0-9]*\): class \([0-9]*\) (.*), probability /\1 \2 /' \
    "$T/ex.out" >"$T/got"
  check "examples/infer: 8 images, each class and probability loopkit predict's" \
    sh -c "test \$(wc -l <'$T/want') -eq 8 && cmp -s '$T/want' '$T/got'"
  check "examples/infer names the classes (image 0 as a class name)" \
    grep -Eq '^image 0: class [0-9] \((T-shirt/top|Trouser|Pullover|Dress|Coat|Sandal|Shirt|Sneaker|Bag|Ankle boot)\)' "$T/ex.out"
  installed "$LK" export "$T/cnn/checkpoints/last.ckpt" -o "$T/cnn.safetensors" >/dev/null 2>&1
  installed "$T/infer/infer" "$T/cnn.ini" "$T/cnn.safetensors" 8 >"$T/ex-st.out" 2>&1
  check "examples/infer on the exported .safetensors (buffers included): the same lines" \
    cmp -s "$T/ex.out" "$T/ex-st.out"
fi

# ---- the API: shapes, forward, refusals ---------------------------------
config blobs <<INI
[loop]
max_epochs = 2
seed = 1
[plugins]
step = sequential
optimizer = sgd
data = npy
callbacks = checkpoint
[npy]
x = $D/x.npy
y = $D/y.npy
test_x = $D/test_x.npy
test_y = $D/test_y.npy
batch_size = 30
[sequential]
layers = linear(8), relu, linear(3)
[sgd]
lr = 0.1
INI
installed "$LK" train "$T/blobs.ini" --out "$T/blobs" --quiet >"$T/train.out" 2>&1
sed 's/linear(8)/linear(5)/' "$T/blobs.ini" >"$T/other.ini"
sed '/^data = /d' "$T/blobs.ini" >"$T/nodata.ini"
cat >"$T/api.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <loopkit/loopkit.h>

/* Each line: what was asked, the status, what lk_last_error() said. */
static void say(const char *what, int rc) {
  printf("%s: %d %s\n", what, rc, rc ? lk_last_error() : "");
}

int main(int argc, char **argv) {
  const char *ini = argv[1], *ckpt = argv[2], *other = argv[3],
             *nodata = argv[4], *x = argv[5];
  lk_model *m = (lk_model *)1;
  (void)argc;
  say("missing config", lk_model_open("/nonexistent.ini", ckpt, &m));
  printf("out after a failure: %s\n", m ? "set" : "NULL");
  say("no data plugin", lk_model_open(nodata, ckpt, &m));
  say("another model's checkpoint", lk_model_open(other, ckpt, &m));
  say("no weights file", lk_model_open(ini, "/nonexistent.ckpt", &m));
  say("open", lk_model_open(ini, ckpt, &m));
  lk_dtype dt;
  size_t nd, dims[LK_MAX_DIMS];
  const char *name;
  lk_model_input_shape(m, &dt, &nd, dims);
  printf("input: dtype %d, %zu dims, [%zu]\n", (int)dt, nd, dims[0]);
  lk_model_output_shape(m, &nd, dims, &name);
  printf("output: %zu dims, [%zu], %s\n", nd, dims[0], name);
  say("null model shape", lk_model_input_shape(NULL, NULL, NULL, NULL));
  say("forward of 0 samples", lk_model_forward(m, NULL, 0, NULL));
  float in[4] = {0}, out[3];
  say("forward without output", lk_model_forward(m, in, 1, NULL));
  /* The first 3 samples of test_x.npy (<f4, format 1.0: the header's
   * length in bytes 8 and 9). */
  FILE *f = fopen(x, "rb");
  unsigned char head[10];
  float xs[12], ys[9];
  if (!f || fread(head, 1, 10, f) != 10 ||
      fseek(f, 10 + head[8] + 256 * head[9], SEEK_SET) ||
      fread(xs, 4, 12, f) != 12)
    return 1;
  fclose(f);
  say("forward of 3 samples", lk_model_forward(m, xs, 3, ys));
  for (int i = 0; i < 9; i++)
    printf("%.9g%c", ys[i], i % 3 == 2 ? '\n' : ' ');
  say("forward of 1 sample", lk_model_forward(m, in, 1, out));
  lk_model_close(m);
  lk_model_close(NULL);
  return 0;
}
C
# shellcheck disable=SC2046
pc sh -c "${LK_CC:-cc} ${LK_SANITIZE:-} -Wall -Wextra -Werror '$T/api.c' -o '$T/api' \$(pkg-config --cflags --libs loopkit)" >"$T/api.log" 2>&1
check "a program of the API builds with pkg-config loopkit only, -Werror" test -x "$T/api"
installed "$T/api" "$T/blobs.ini" "$T/blobs/checkpoints/last.ckpt" "$T/other.ini" \
  "$T/nodata.ini" "$D/test_x.npy" >"$T/api.out" 2>&1
check "the program exits 0" test $? -eq 0
has() { grep -Eq -- "$1" "$T/api.out"; }
check "a missing config: LK_ENOTFOUND or LK_EIO naming the file, OUT NULL" \
  sh -c "grep -Eq '^missing config: -[0-9]+ .*/nonexistent.ini' '$T/api.out' && grep -q '^out after a failure: NULL' '$T/api.out'"
check "a config without a data plugin: refused naming [plugins] data" \
  has "^no data plugin: -[0-9]+ .*\[plugins\] data"
check "another model's checkpoint: refused naming the parameter and its shapes" \
  has "^another model's checkpoint: -[0-9]+ .*0\.weight is f32\[8,4\] there but f32\[5,4\]"
check "a missing weights file: refused naming it" \
  has "^no weights file: -[0-9]+ .*/nonexistent.ckpt"
check "open: 0" has "^open: 0"
check "input shape: f32 (dtype 1), [4]" has "^input: dtype 1, 1 dims, \[4\]$"
check "output shape: [3], logits" has "^output: 1 dims, \[3\], logits$"
check "a NULL model: LK_EINVAL" has "^null model shape: -[0-9]+ lk_model_input_shape: M is NULL"
check "forward of 0 samples: 0, nothing touched" has "^forward of 0 samples: 0"
check "forward without an output: refused" has "^forward without output: -[0-9]+ lk_model_forward: OUTPUT is NULL"
check "forward of 3 samples: 0" has "^forward of 3 samples: 0"
# The same 3 samples through loopkit predict: the logits' argmax.
installed "$LK" predict "$T/blobs.ini" --ckpt "$T/blobs/checkpoints/last.ckpt" >"$T/pred.csv" 2>&1
awk 'NR >= 13 && NR <= 15 { a = 1; for (j = 2; j <= 3; j++) if ($j > $a) a = j; print a - 1 }' \
  "$T/api.out" >"$T/api-class"
awk -F, 'NR >= 2 && NR <= 4 { print $2 }' "$T/pred.csv" >"$T/pred-class"
check "its classes are loopkit predict's for those samples" \
  sh -c "test \$(wc -l <'$T/api-class') -eq 3 && cmp -s '$T/api-class' '$T/pred-class'"
check "forward of 1 sample after 3: 0" has "^forward of 1 sample: 0"

finish

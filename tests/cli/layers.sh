#!/bin/sh
# The layer interface (loopkit/layer.h): a layer is its table, and the
# model plugins hold no per-kind code: no switch on a layer's kind, no
# comparison of a layer's type or name with a particular one, no enum of
# kinds. Each check is first shown a made-up violation it must report.
. "$LK_SRCDIR/tests/cli/lib.sh"
S=$LK_SRCDIR

# per_kind FILE...: prints the lines that branch on a layer's kind
per_kind() {
  grep -nE 'switch *\([^)]*(kind|type)|(kind|->type|\.type) *[!=]= |[!=]= *&lk__layer_|SEQ_(CONV2D|RELU|LINEAR|FLATTEN|MAXPOOL2D|EMBEDDING|BATCHNORM|DROPOUT)|str(case)?cmp\([^)]*(->|\.)(type->)?name, *"(conv2d|maxpool2d|avgpool2d|batchnorm[12]d|layernorm|relu|gelu|tanh|sigmoid|dropout|flatten|linear|embedding)"' "$@"
}

cat >"$T/planted.c" <<'C'
static int f(const seq_layer *l) {
  switch (l->s.kind) {
  case SEQ_RELU: return 1;
  }
  if (l->l.type == &lk__layer_relu || !strcmp(l->l.type->name, "relu"))
    return 2;
  return 0;
}
C
per_kind "$T/planted.c" >"$T/found"
check "a planted per-kind switch and if-chain are found (3 lines)" \
  test "$(wc -l <"$T/found")" -eq 3

find "$S/plugins/model" -name '*.[ch]' >"$T/files"
check "the model plugins are there to search" test -s "$T/files"
per_kind $(cat "$T/files") >"$T/found"
check "no per-kind switch or if-chain on a layer in plugins/model/" \
  test ! -s "$T/found"
[ -s "$T/found" ] && sed 's/^/# /' "$T/found"

# a new built-in layer is one file and one line of src/nn/layers/list.h
L=$S/src/nn/layers
entries=$(grep -c '^LK_LAYER_ENTRY(' "$L/list.h")
files=0
for id in $(sed -n 's/^LK_LAYER_ENTRY(\(.*\))$/\1/p' "$L/list.h"); do
  [ -f "$L/$id.c" ] && grep -q "lk_layer_type lk__layer_$id = " "$L/$id.c" &&
    files=$((files + 1))
done
check "every registered layer ($entries) is its own file defining its table" \
  test "$entries" -eq "$files" -a "$entries" -ge 14

finish

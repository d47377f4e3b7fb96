#!/bin/sh
# Every example config in examples/ trains without error and fills its run
# directory. Examples on the Fashion-MNIST files train on a slice of them
# for one epoch here (the full runs are minutes; the closing notes give
# their accuracies), and are skipped where the data set is not installed.
. "$LK_SRCDIR/tests/cli/lib.sh"

for ini in "$LK_SRCDIR"/examples/*.ini; do
  name=$(basename "$ini" .ini)
  set --
  if grep -q '^data *= *idx' "$ini"; then
    if [ ! -d /usr/share/datasets/fashion-mnist ]; then
      ok "examples/$name.ini # SKIP dataset-fashion-mnist is not installed"
      continue
    fi
    set -- --set loop.max_epochs=1 --set idx.limit=2000
  fi
  expect 0 '^trained [0-9]+ steps' "examples/$name.ini trains" -- train "$ini" --out "$T/$name" --quiet "$@"
  check "examples/$name.ini: loss is finite in its last row" \
    sh -c "tail -1 '$T/$name/metrics.csv' | cut -d, -f3 | grep -Eqv 'nan|inf'"
done
finish

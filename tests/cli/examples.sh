#!/bin/sh
# Every example config in examples/ trains without error and fills its run
# directory.
. "$LK_SRCDIR/tests/cli/lib.sh"

for ini in "$LK_SRCDIR"/examples/*.ini; do
  name=$(basename "$ini" .ini)
  expect 0 '^trained [0-9]+ steps' "examples/$name.ini trains" -- train "$ini" --out "$T/$name" --quiet
  check "examples/$name.ini: loss is finite in its last row" \
    sh -c "tail -1 '$T/$name/metrics.csv' | cut -d, -f3 | grep -Eqv 'nan|inf'"
done
finish

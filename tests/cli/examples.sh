#!/bin/sh
# Every example config in examples/ trains without error and fills its run
# directory. Examples on the Fashion-MNIST files train on a slice of them
# for one epoch here (the full runs are minutes; the closing notes give
# their accuracies), the GPT on the Jargon File for 20 steps, and each is
# skipped where its data set is not installed.
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
  elif grep -q '^data *= *text' "$ini"; then
    if [ ! -f /usr/share/doc/jargon-text/jargon.txt.gz ]; then
      ok "examples/$name.ini # SKIP jargon-text is not installed"
      continue
    fi
    # 2000 steps are minutes: 20 of them, and a short validation
    set -- --set loop.max_epochs=1 --set loop.max_steps=20 \
      --set text.batches_per_epoch=20 --set text.val_batches=2
  fi
  # The real models' examples (a CNN, a GPT) take minutes a run under
  # valgrind, even shortened (the CNN's test alone, 10000 images, took over
  # 20): there, the ASan pass, sequential.sh and gpt.sh cover their code.
  if [ -n "${LK_LOOPKIT:-}" ] && grep -Eq '^step *= *(sequential|gpt)' "$ini"; then
    ok "examples/$name.ini # SKIP a real model under valgrind (LK_LOOPKIT)"
    continue
  fi
  expect 0 '^trained [0-9]+ steps' "examples/$name.ini trains" -- train "$ini" --out "$T/$name" --quiet "$@"
  check "examples/$name.ini: loss is finite in its last row" \
    sh -c "tail -1 '$T/$name/metrics.csv' | cut -d, -f3 | grep -Eqv 'nan|inf'"
done
finish

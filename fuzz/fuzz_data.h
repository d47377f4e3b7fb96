/* What the idx and csv targets share: the options of data_common.h taken
 * from input bytes (as data_new would take them from a config, with the
 * same checks), and a walk over every batch of every split once a reader
 * and data_setup have succeeded. Include after the plugin's .c file. */
#ifndef LOOPKIT_FUZZ_DATA_H
#define LOOPKIT_FUZZ_DATA_H

#include "fuzz_util.h"

/* Fifteen bytes: batch_size (8), limit (4), val_split (1), seed (1),
 * flags (1: bit 0 shuffle, bit 1 drop_last, the rest for the target).
 * NULL where data_new would refuse them (batch_size < 1). The host stays
 * NULL: the readers reach it only through lk_fail, which ignores it. */
static data_set *fuzz_data_new(fuzz_in *in, unsigned *flags) {
  int64_t bs = (int64_t)fuzz_take(in, 8);
  size_t limit = (size_t)fuzz_take(in, 4);
  double vs = (double)fuzz_take(in, 1) / 256.0;
  uint64_t seed = fuzz_take(in, 1);
  *flags = (unsigned)fuzz_take(in, 1);
  if (bs < 1)
    return NULL;
  data_set *d = calloc(1, sizeof *d);
  FUZZ_CHECK(d != NULL, "calloc");
  d->batch_size = (size_t)bs;
  d->limit = limit;
  d->val_split = vs;
  d->seed = seed;
  d->shuffle = *flags & 1;
  d->drop_last = *flags & 2;
  return d;
}

/* Every batch of every split, for two epochs: sizes add up, values are
 * finite, class labels are in [0, max_label]. */
static void fuzz_data_walk(data_set *d, int32_t max_label) {
  for (int s = LK_SPLIT_TRAIN; s <= LK_SPLIT_TEST; s++)
    for (uint64_t epoch = 0; epoch < 2; epoch++) {
      size_t nb = 0, seen = 0, n = d->n[s];
      int rc = data_epoch(d, (lk_split)s, epoch, &nb);
      FUZZ_CHECK(rc == 0, "data_epoch(%d) returned %d", s, rc);
      for (size_t b = 0; b < nb; b++) {
        lk_batch out;
        memset(&out, 0, sizeof out);
        rc = data_batch(d, (lk_split)s, b, &out);
        FUZZ_CHECK(rc == 0, "data_batch(%d, %zu) returned %d", s, b, rc);
        FUZZ_CHECK(out.size >= 1 && out.size <= d->batch_size,
                   "batch of %zu samples", out.size);
        FUZZ_CHECK(out.x.numel == out.size * d->features &&
                       out.y.numel == out.size,
                   "batch shapes");
        const float *x = out.x.data;
        for (size_t i = 0; i < out.x.numel; i++)
          FUZZ_CHECK(isfinite(x[i]), "split %d batch %zu: x[%zu] = %g", s, b, i,
                     (double)x[i]);
        for (size_t i = 0; i < out.size; i++) {
          if (d->y_dtype == LK_I32) {
            int32_t y = ((const int32_t *)out.y.data)[i];
            FUZZ_CHECK(y >= 0 && y <= max_label, "label %d", (int)y);
          } else {
            FUZZ_CHECK(isfinite(((const float *)out.y.data)[i]), "target");
          }
        }
        seen += out.size;
      }
      bool dropped = s == LK_SPLIT_TRAIN && d->drop_last;
      FUZZ_CHECK(dropped ? seen == n - n % d->batch_size : seen == n,
                 "split %d: %zu samples in batches, %zu in the split", s, seen,
                 n);
      lk_batch out;
      FUZZ_CHECK(data_batch(d, (lk_split)s, nb, &out) == LK_EINVAL,
                 "batch past the end");
    }
}

#endif

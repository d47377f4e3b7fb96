/* The idx data plugin's reader (read_idx and load in plugins/data/idx.c, then
 * data_setup, data_epoch and data_batch of plugins/lib/data_common.h).
 *
 * Input: the options of fuzz_data.h (15 bytes; flags bits 2-3 pick
 * normalize: none, scale, standard), three u16 lengths, then the four
 * files: training images, training labels, test images and, the rest of
 * the input, test labels. Each file goes to an in-memory file that the
 * plugin opens by path, through zlib, exactly as it opens a real one: a
 * file that starts with the gzip magic is decompressed, so the seed corpus
 * holds gzip-compressed inputs as well as plain ones.
 *
 * The plugin's create is not called: it would need a run for its options
 * and seed. This file does what it does between reading the options and
 * logging (find is replaced by the in-memory paths). */
#include "../plugins/data/idx.c"
#include "fuzz_data.h"

static fuzz_file files[4];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  for (int i = 0; i < 4; i++)
    fuzz_file_open(&files[i], base_names[i]);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in in = {data, size};
  unsigned flags;
  data_set *d = fuzz_data_new(&in, &flags);
  size_t lens[4];
  for (int i = 0; i < 3; i++)
    lens[i] = (size_t)fuzz_take(&in, 2);
  lens[3] = SIZE_MAX;
  if (!d)
    return 0;
  d->normalize = (int)((flags >> 2) & 3) % 3; /* the DATA_NORM_* values */
  d->y_dtype = LK_I32;

  idx_file idx[4] = {{0}};
  for (int i = 0; i < 4; i++) {
    size_t got;
    const uint8_t *p = fuzz_bytes(&in, lens[i], &got);
    fuzz_file_set(&files[i], p, got);
    idx[i].path = files[i].path;
  }
  bool scale = d->normalize == DATA_NORM_SCALE;
  int rc = load(d, &idx[TRAIN_IMAGES], &idx[TRAIN_LABELS], 0, d->limit, scale);
  if (rc == 0)
    rc = load(d, &idx[TEST_IMAGES], &idx[TEST_LABELS], 1, 0, scale);
  if (rc == 0)
    rc = data_setup(d, scale ? DATA_NORM_NONE : d->normalize);
  for (int i = 0; i < 4; i++)
    free(idx[i].bytes);
  fuzz_report(rc);
  if (rc == 0) {
    FUZZ_CHECK(d->features >= 1 && d->n[LK_SPLIT_TRAIN] >= 1 &&
                   d->n[LK_SPLIT_TEST] >= 1,
               "an accepted data set without features or samples");
    fuzz_data_walk(d, 255);
  } else {
    const char *msg = lk_last_error();
    FUZZ_CHECK(rc == LK_EFORMAT || rc == LK_ENOMEM || rc == LK_ECONFIG ||
                   rc == LK_EINVAL,
               "returned %d", rc);
    /* a file's error names it; a split's (data_setup) names the option */
    FUZZ_CHECK(strstr(msg, "/proc/self/fd/") || rc == LK_ECONFIG ||
                   rc == LK_EINVAL || rc == LK_ENOMEM,
               "message names no file: \"%s\"", msg);
  }
  data_destroy(d);
  return 0;
}

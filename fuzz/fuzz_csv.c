/* The csv data plugin's reader (parse_text in plugins/data/csv.c, then
 * data_setup, data_epoch and data_batch of plugins/lib/data_common.h).
 *
 * Input: the options of fuzz_data.h (15 bytes; flags bit 2 header, bit 3
 * labels = int, bits 4-5 normalize: none, scale, standard, bit 6 a test
 * file), the delimiter (1 byte, checked as delimiter_of checks the
 * option), label_column (1 signed byte), the training file's length (u16),
 * the training file, and the rest of the input: the test file. Each file is
 * handed to parse_text as slurp would hand it: its bytes and a NUL.
 *
 * The plugin's create is not called: it would need a run for its options
 * and seed. This file does what it does between reading the options and
 * logging. */
#include "../plugins/data/csv.c"
#include "fuzz_data.h"

/* A malloc'd copy of LEN bytes and a NUL, as slurp returns a file. */
static char *text_of(const uint8_t *p, size_t len) {
  char *t = malloc(len + 1);
  FUZZ_CHECK(t != NULL, "malloc");
  if (len)
    memcpy(t, p, len);
  t[len] = '\0';
  return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in in = {data, size};
  unsigned flags;
  data_set *d = fuzz_data_new(&in, &flags);
  char delim[2] = {(char)fuzz_take(&in, 1), '\0'};
  int8_t label = (int8_t)fuzz_take(&in, 1);
  size_t train_len = (size_t)fuzz_take(&in, 2);
  reader r = {.host = NULL,
              .header = flags & 4,
              .int_labels = flags & 8,
              .label_option = label};
  if (!d)
    return 0;
  if (delimiter_of(NULL, delim, &r.delim) != 0) { /* create refuses it */
    data_destroy(d);
    return 0;
  }
  d->normalize = (int)((flags >> 4) & 3) % 3;
  d->y_dtype = r.int_labels ? LK_I32 : LK_F32;
  bool test = flags & 64;

  size_t got;
  const uint8_t *p = fuzz_bytes(&in, train_len, &got);
  char *train_text = text_of(p, got);
  int rc = parse_text(&r, d, "train.csv", train_text, got, 0, d->limit);
  free(train_text);
  if (rc == 0 && test) {
    p = fuzz_bytes(&in, SIZE_MAX, &got);
    char *test_text = text_of(p, got);
    rc = parse_text(&r, d, "test.csv", test_text, got, 1, 0);
    free(test_text);
  }
  if (rc == 0)
    rc = data_setup(d, d->normalize);
  fuzz_report(rc);
  if (rc == 0) {
    FUZZ_CHECK(d->features >= 1 && d->features == r.ncols - 1 &&
                   d->n[LK_SPLIT_TRAIN] >= 1,
               "an accepted data set without features or samples");
    fuzz_data_walk(d, r.int_labels ? r.max_label : 0);
  } else {
    const char *msg = lk_last_error();
    FUZZ_CHECK(rc == LK_EFORMAT || rc == LK_ENOMEM || rc == LK_ECONFIG ||
                   rc == LK_EINVAL,
               "returned %d", rc);
    /* a file's error names it; a split's (data_setup) names the option */
    FUZZ_CHECK(strstr(msg, "train.csv") || strstr(msg, "test.csv") ||
                   rc == LK_ECONFIG || rc == LK_EINVAL || rc == LK_ENOMEM,
               "message names no file: \"%s\"", msg);
  }
  data_destroy(d);
  return 0;
}

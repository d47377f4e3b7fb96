/* text: a text file, gzip-compressed or not, as byte tokens for a language
 * model (gpt). The file is read whole at create; its last val_split of
 * bytes is the validation part, the rest the training part. Several files
 * (path = a.txt, b.txt, or a shell pattern, standing for its matches in
 * sorted order) are read as one, in the order given, with the byte
 * separator between two (none by default).
 *
 * block_size = auto (the default) is the model's: the host gives it gpt's
 * block_size (or a sequential net's) before create, so that the data's windows
 * and the model's context are one number.
 *
 * A sample is a window of block_size + 1 consecutive bytes: x is its first
 * block_size bytes, y the same shifted by one (the next byte at every
 * position), both i32 [batch_size, block_size].
 *
 * - Training: each window starts at a position drawn uniformly from the
 *   training part's (train_len - block_size of them) with the host's
 *   generator, which every checkpoint carries: a run is repeatable and a
 *   resumed one draws the same windows. An epoch is batches_per_epoch
 *   batches (0: as many as it takes to draw as many tokens as the training
 *   part has, train_len / (batch_size * block_size), at least one).
 * - Validation: a fixed set of windows, the same every time: those that
 *   start at multiples of block_size in the validation part (so every byte
 *   but the first is a target once), or with val_batches = N only N
 *   batches of them, spread evenly over the part. No draw.
 * - Test: none.
 *
 * shape() says what a sample is: block_size tokens in, block_size targets
 * out, and n_classes = the largest byte in the file plus one, so that the
 * model can check its block size and vocabulary at create. */
#include <glob.h>
#include <math.h>
#include <stdio.h>

#include "bundled.h"
#include "data_common.h"
#include "gz_read.h"

#define MAX_BYTES ((size_t)1 << 30) /* 1 GiB of text, uncompressed */

typedef struct text {
  lk_host *host;
  const unsigned char *bytes;
  unsigned char *owned;
  size_t len, T, B;
  size_t train_len, val_start, val_len;
  size_t per_epoch; /* training batches per epoch */
  size_t val_all;   /* windows at multiples of T in the validation part */
  size_t val_used;  /* the ones validation uses */
  size_t max_byte;  /* the largest byte of the file */
  uint64_t epoch[3];
  int32_t *bx, *by; /* the batch handed out, [B, T] each */
} text;

static void destroy(void *self) {
  text *d = self;
  if (!d)
    return;
  free(d->owned);
  free(d->bx);
  free(d->by);
  free(d);
}

/* The parts and the epoch from the options, once the bytes are in. */
static int setup(text *d, const char *path, double val_split, int64_t per_epoch,
                 int64_t val_batches) {
  size_t need = d->T + 1;
  d->val_len = val_split > 0 ? (size_t)floor(val_split * (double)d->len) : 0;
  d->train_len = d->len - d->val_len;
  d->val_start = d->train_len;
  if (d->train_len < need)
    return lk_fail(d->host, LK_ECONFIG,
                   "%s has %zu bytes: its training part (%zu bytes%s) is "
                   "shorter than one window of block_size + 1 = %zu bytes",
                   path, d->len, d->train_len,
                   d->val_len ? ", the rest is val_split's" : "", need);
  if (val_split > 0 && d->val_len < need)
    return lk_fail(d->host, LK_ECONFIG,
                   "%s has %zu bytes: val_split = %g gives a validation part "
                   "of %zu bytes, shorter than one window of block_size + 1 "
                   "= %zu bytes",
                   path, d->len, val_split, d->val_len, need);
  d->per_epoch =
      per_epoch > 0 ? (size_t)per_epoch : d->train_len / (d->B * d->T);
  if (d->per_epoch == 0)
    d->per_epoch = 1;
  d->val_all = d->val_len ? (d->val_len - 1) / d->T : 0;
  d->val_used = d->val_all;
  if (val_batches > 0 && (size_t)val_batches <= d->val_all / d->B)
    d->val_used = (size_t)val_batches * d->B;
  for (size_t i = 0; i < d->len; i++)
    if (d->bytes[i] > d->max_byte)
      d->max_byte = d->bytes[i];
  size_t bytes = 0; /* B, T <= 2^20 (their ranges): no wrap, but checked */
  bool fits = lk_size_mul(d->B, d->T, &bytes) &&
              lk_size_mul(bytes, sizeof *d->bx, &bytes);
  d->bx = fits ? malloc(bytes) : NULL;
  d->by = fits ? malloc(bytes) : NULL;
  if (!d->bx || !d->by)
    return lk_fail(d->host, LK_ENOMEM, "out of memory for batches of %zu x %zu",
                   d->B, d->T);
  return 0;
}

/* FILE's bytes appended to D's, after the separator byte SEP (-1: none)
 * when D has some already. */
static int append_file(text *d, const char *file, int64_t sep) {
  unsigned char *buf = NULL;
  size_t len = 0, room = MAX_BYTES - d->len;
  int rc = gz_slurp(d->host, file, "text file", room, &buf, &len);
  if (rc != 0)
    return rc;
  size_t extra = d->len && sep >= 0 ? 1 : 0;
  unsigned char *grown = NULL;
  if (len + extra > room)
    rc = lk_fail(d->host, LK_ECONFIG,
                 "%s: the text files come to more than %zu bytes", file,
                 (size_t)MAX_BYTES);
  else if (!(grown = d->len ? realloc(d->owned, d->len + extra + len) : buf))
    rc = lk_fail(d->host, LK_ENOMEM, "out of memory for %s", file);
  if (rc == 0 && grown != buf) {
    if (extra)
      grown[d->len] = (unsigned char)sep;
    memcpy(grown + d->len + extra, buf, len);
    free(buf);
  }
  if (rc != 0) {
    free(buf);
    return rc;
  }
  d->owned = grown;
  d->len += extra + len;
  return 0;
}

/* Every file of PATHS (made absolute by the host, comma separated), a
 * shell pattern standing for its matches in glob's (sorted) order. */
static int read_files(text *d, const char *paths, int64_t sep,
                      size_t *n_files) {
  char *copy = strdup(paths), *save = NULL;
  int rc = copy ? 0 : lk_fail(d->host, LK_ENOMEM, "out of memory");
  for (char *item = rc ? NULL : strtok_r(copy, ",", &save); item && rc == 0;
       item = strtok_r(NULL, ",", &save)) {
    if (!strpbrk(item, "*?[")) {
      rc = append_file(d, item, sep);
      *n_files += rc == 0;
      continue;
    }
    glob_t g;
    memset(&g, 0, sizeof g);
    int grc = glob(item, GLOB_ERR, NULL, &g);
    if (grc == GLOB_NOMATCH)
      rc = lk_fail(d->host, LK_ECONFIG, "path: no file matches %s", item);
    else if (grc != 0)
      rc = lk_fail(d->host, grc == GLOB_NOSPACE ? LK_ENOMEM : LK_EIO,
                   "path: cannot expand %s", item);
    for (size_t i = 0; grc == 0 && rc == 0 && i < g.gl_pathc; i++) {
      rc = append_file(d, g.gl_pathv[i], sep);
      *n_files += rc == 0;
    }
    globfree(&g); /* also after a failure: what glob allocated */
  }
  free(copy);
  return rc;
}

static int create(lk_host *host, const lk_options *o, void **self) {
  text *d = calloc(1, sizeof *d);
  if (!d)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  d->host = host;
  d->T = (size_t)lk_opt_int(o, "block_size");
  d->B = (size_t)lk_opt_int(o, "batch_size");
  const char *path = lk_opt_string(o, "path");
  size_t n_files = 0;
  int rc = read_files(d, path, lk_opt_int(o, "separator"), &n_files);
  d->bytes = d->owned;
  if (rc == 0 && n_files > 1)
    lk_log(host, LK_LOG_INFO, "%zu text files read as one: %s", n_files, path);
  if (rc == 0)
    rc =
        setup(d, path, lk_opt_double(o, "val_split"),
              lk_opt_int(o, "batches_per_epoch"), lk_opt_int(o, "val_batches"));
  if (rc != 0) {
    destroy(d);
    return rc;
  }
  lk_log(host, LK_LOG_INFO,
         "%zu bytes from %s: %zu for training (%zu batches an epoch), %zu "
         "for validation (%zu windows of %zu)",
         d->len, path, d->train_len, d->per_epoch, d->val_len, d->val_used,
         d->T + 1);
  *self = d;
  return 0;
}

static int shape(void *self, lk_sample_shape *out) {
  const text *d = self;
  *out = (lk_sample_shape){.x_dtype = LK_I32,
                           .x_ndim = 1,
                           .x_shape = {d->T},
                           .y_dtype = LK_I32,
                           .y_ndim = 1,
                           .y_shape = {d->T},
                           .n_classes = d->max_byte + 1};
  return 0;
}

static size_t batches(const text *d, lk_split split) {
  if (split == LK_SPLIT_TRAIN)
    return d->per_epoch;
  if (split == LK_SPLIT_VAL)
    return (d->val_used + d->B - 1) / d->B;
  return 0;
}

static int epoch(void *self, lk_split split, uint64_t e, size_t *n) {
  text *d = self;
  if ((unsigned)split > LK_SPLIT_TEST)
    return lk_fail(d->host, LK_EINVAL, "no split number %d", (int)split);
  d->epoch[split] = e;
  *n = batches(d, split);
  return 0;
}

/* Window I of the W that validation uses, spread evenly over all. */
static size_t val_position(const text *d, size_t i) {
  size_t k = d->val_used == d->val_all
                 ? i
                 : (size_t)((unsigned long long)i * d->val_all / d->val_used);
  return d->val_start + k * d->T;
}

static int batch(void *self, lk_split split, size_t index, lk_batch *out) {
  text *d = self;
  int rc = data_check_batch(d->host, split, index,
                            (unsigned)split <= LK_SPLIT_TEST ? batches(d, split)
                                                             : 0);
  if (rc != 0)
    return rc;
  size_t size = d->B, T = d->T;
  if (split == LK_SPLIT_VAL && (index + 1) * d->B > d->val_used)
    size = d->val_used - index * d->B;
  lk_rng *rng = lk_host_rng(d->host);
  size_t starts = d->train_len - T; /* positions a training window may take */
  for (size_t i = 0; i < size; i++) {
    /* The modulo's bias is below 2^-34 for any part a file can have. */
    size_t at = split == LK_SPLIT_TRAIN ? (size_t)(lk_rng_u64(rng) % starts)
                                        : val_position(d, index * d->B + i);
    const unsigned char *p = d->bytes + at;
    for (size_t t = 0; t < T; t++) {
      d->bx[i * T + t] = p[t];
      d->by[i * T + t] = p[t + 1];
    }
  }
  *out = data_batch_of(split, d->epoch[split], index,
                       data_tensor("x", LK_I32, size, 1, &T, d->bx),
                       data_tensor("y", LK_I32, size, 1, &T, d->by));
  return 0;
}

static const lk_option options[] = {
    {"path", LK_OPT_PATHS, "/usr/share/doc/jargon-text/jargon.txt.gz",
     "the text file, gzip-compressed or not (default: the Jargon File, "
     "Debian's jargon-text); several, comma separated, or a shell pattern "
     "(its matches in sorted order), are read as one, in order",
     NULL},
    {"separator", LK_OPT_INT, "-1",
     "a byte put between two files read as one (10: a newline; 0: a NUL as "
     "an end-of-text token); -1: none",
     "[-1, 255]"},
    {"block_size", LK_OPT_INT, "auto",
     "tokens (bytes) per sample; a window is block_size + 1 bytes; auto: "
     "the model's block_size (gpt's, or sequential's over tokens)",
     "[1, 1048576] or auto"},
    {"batch_size", LK_OPT_INT, "12", "windows per batch", "[1, 1048576]"},
    {"val_split", LK_OPT_DOUBLE, "0.1",
     "fraction of the file, at its end, for validation (0: none)", "[0, 1)"},
    {"batches_per_epoch", LK_OPT_INT, "0",
     "training batches per epoch (0: training bytes / (batch_size * "
     "block_size), at least 1)",
     "[0, inf)"},
    {"val_batches", LK_OPT_INT, "0",
     "validation batches (0: every window at a multiple of block_size in "
     "the validation part; N: N batches of them, spread evenly)",
     "[0, inf)"},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_data_ops data_ops = {
    .epoch = epoch, .batch = batch, .shape = shape};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor =
    BUNDLED_PLUGIN("text",
                   "a text file (gzip or not) as byte tokens, in windows for a "
                   "language model",
                   destroy, NULL, .data = &data_ops);

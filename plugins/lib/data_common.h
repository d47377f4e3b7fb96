/* What the idx and csv data plugins share: the samples in memory as f32
 * rows, the three splits (validation held out of the training file, test
 * from a file of its own or, with test_split, held out of the training
 * file too), normalization from training statistics only,
 * per-epoch shuffling and batching. A plugin's reader fills file[0] (the
 * training file) and file[1] (the test file, n = 0 if none) and calls
 * data_setup; data_epoch, data_batch and data_destroy are then its entries.
 *
 * Randomness comes from the run's seed through streams of our own, never
 * from the host's shared generator: the order of epoch E is the same
 * whatever other plugins drew, and a resumed run sees the same orders.
 * Built once into plugins/lib/libplugincommon.la (data_common.c). */
#ifndef LOOPKIT_PLUGINS_DATA_COMMON_H
#define LOOPKIT_PLUGINS_DATA_COMMON_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

enum { DATA_NORM_NONE, DATA_NORM_SCALE, DATA_NORM_STANDARD };

/* Streams of lk_rng_seed: the permutation that picks the held-out
 * validation samples, and the shuffle of epoch E at DATA_STREAM_SHUFFLE + E
 * (far apart, so that no epoch number reaches the other). */
#define DATA_STREAM_VAL 0x76616c2d73706c74ULL /* "val-splt" */
#define DATA_STREAM_SHUFFLE 0x5348554600000000ULL

/* The options both plugins declare, in their option tables. */
/* clang-format off */
#define DATA_COMMON_OPTIONS(normalize_default, scale_help)                    \
  {"batch_size", LK_OPT_INT, "64", "samples per batch", "[1, inf)"},          \
  {"shuffle", LK_OPT_BOOL, "true",                                            \
   "shuffle the training split, a new order each epoch drawn from "           \
   "[loop] seed", NULL},                                                      \
  {"drop_last", LK_OPT_BOOL, "false",                                         \
   "drop the training split's last batch when it is short", NULL},            \
  {"normalize", LK_OPT_ENUM, normalize_default,                               \
   "none; scale: " scale_help "; standard: (x - mean) / std per feature; "    \
   "statistics from the training part only (after val_split), applied to "    \
   "every split", "none|scale|standard"},                                     \
  {"val_split", LK_OPT_DOUBLE, "0",                                           \
   "fraction of the training samples held out for validation, the same "      \
   "ones every epoch (drawn from [loop] seed)", "[0, 1)"},                    \
  {"limit", LK_OPT_INT, "0",                                                  \
   "use only the first N samples of the training file (0: all)", "[0, inf)"}
/* clang-format on */

/* The samples of one file, as read. */
typedef struct data_file {
  const char *path; /* for messages; set by the reader, valid during create */
  size_t n;
  float *x; /* [n, features] */
  void *y;  /* [n]: int32_t class labels or float targets */
} data_file;

typedef struct data_set {
  lk_host *host;
  /* options */
  size_t batch_size, limit;
  bool shuffle, drop_last;
  double val_split;
  double test_split; /* csv's: 0 unless the plugin declares it */
  int normalize;
  /* what the reader fills in */
  size_t features;
  size_t x_ndim, x_shape[LK_MAX_DIMS]; /* one sample (features in all) */
  lk_dtype y_dtype;                    /* LK_I32 or LK_F32 */
  data_file file[2];                   /* [0] training file, [1] test file */
  /* what data_setup derives */
  uint64_t seed;
  size_t n[3];     /* samples per split */
  bool test_held;  /* the test split is rows of file[0] (test_split) */
  size_t *rows[3]; /* per split: its rows of its file, in file order */
  size_t *order;   /* the training rows in this epoch's order */
  uint64_t epoch[3];
  float *bx; /* the batch handed out */
  void *by;
} data_set;

void data_destroy(void *self);

/* Reads the common options into a new data_set (their ranges are declared
 * in DATA_COMMON_OPTIONS and enforced by the host). */
int data_new(lk_host *host, const lk_options *o, data_set **out);

/* Allocates room for N samples of file K (d->features and d->y_dtype set). */
int data_alloc(data_set *d, int k, size_t n);

/* FRACTION of N samples, at least one if any is asked for. */
size_t data_part(double fraction, size_t n);

/* Derives the splits once the reader has filled the files: applies limit,
 * holds out val_split (and test_split) of the training file, normalizes
 * with NORM (a plugin that scaled while reading passes DATA_NORM_NONE),
 * makes the buffers. */
int data_setup(data_set *d, int norm);

/* The split sizes, from the training file's N rows of which N_VAL and
 * N_TEST are held out, and the rows of separate validation and test files
 * (FILE_VAL, FILE_TEST; 0: none). Refused when no training sample is
 * left, or no training batch with drop_last. */
int data_splits(data_set *d, size_t n, size_t n_val, size_t n_test,
                size_t file_val, size_t file_test);

/* The rows of each split once data_splits has sized them: the first N_VAL
 * of a fixed permutation of the training file's N rows for validation, its
 * last N_TEST for the test, the rest for training, each in file order; a
 * split read from a file of its own (FROM_FILE) has all of that file's
 * rows. Then the batch buffers, for Y_NUMEL values of y a sample. */
int data_rows(data_set *d, size_t n, size_t n_val, size_t n_test,
              const bool from_file[3], size_t y_numel);

size_t data_batches(const data_set *d, lk_split split);

/* What a sample looks like (lk_data_ops.shape): the reader's shape of x
 * (features, or an image's channel, height and width), and for labels the
 * number of classes the files hold (the largest label plus one). */
int data_shape(void *self, lk_sample_shape *out);

int data_epoch(void *self, lk_split split, uint64_t epoch, size_t *n_batches);

/* 0 when INDEX is one of the NB batches of SPLIT, else LK_EINVAL naming
 * both. */
int data_check_batch(lk_host *host, lk_split split, size_t index, size_t nb);

/* The rows of batch INDEX of SPLIT, in the order they are handed out, and
 * how many (the last batch may be short); LK_EINVAL for a split or a batch
 * that does not exist. */
int data_batch_rows(const data_set *d, lk_split split, size_t index,
                    const size_t **rows, size_t *size);

/* A tensor NAME [SIZE, SHAPE...] (NDIM dimensions after the batch's) at
 * DATA. */
lk_tensor data_tensor(const char *name, lk_dtype dtype, size_t size,
                      size_t ndim, const size_t *shape, void *data);

/* Batch INDEX of SPLIT in EPOCH: X and Y, of as many samples as X's first
 * dimension says. */
lk_batch data_batch_of(lk_split split, uint64_t epoch, size_t index,
                       lk_tensor x, lk_tensor y);

int data_batch(void *self, lk_split split, size_t index, lk_batch *out);

#endif

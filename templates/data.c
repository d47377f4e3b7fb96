/* @NAME@: a synthetic regression data set, drawn from the run's seed:
 * x ~ N(0, 1) per feature and y = w . x + 0.5 + noise, with the known
 * weights w = (1, -2, 3, -4, ...). A loopkit plugin of kind data, written
 * by `loopkit new`, for the bundled linear model (x f32 [B, inputs], y f32
 * [B]), or any model that takes such batches.
 *
 * Try it:   make && loopkit train @NAME@.ini
 * @NAME@.ini trains the bundled linear model on it with the bundled sgd:
 * metrics.csv in the run directory has the loss per step and val_loss per
 * epoch, and `loopkit dump RUN_DIR/checkpoints/last.ckpt` shows weight
 * close to w and bias close to 0.5.
 *
 * A data set needs no state to resume: what it hands out depends only on
 * the seed and the epoch, and the loop saves where in the epoch it is.
 * Its randomness is the run's: the samples come from lk_host_rng, the
 * shuffle from a generator of our own seeded from lk_host_seed.
 *
 * shape says what one sample looks like before any batch is drawn: a model
 * sizes itself from it, or refuses a mismatch as a config error at create
 * (linear with inputs = 4 on samples of 3 features, say). */
#include "preamble.h"

/* A stream of our own for the shuffle of epoch E: STREAM + E. */
#define SHUFFLE_STREAM 0x5348554646000000ULL

typedef struct dataset {
  lk_host *host;
  size_t inputs, batch_size, n[3]; /* samples per split: train, val, test */
  bool shuffle;
  float *x[3], *y[3]; /* per split: [n, inputs] and [n] */
  size_t *order;      /* the training samples in this epoch's order */
  float *bx, *by;     /* the batch handed out */
} dataset;

static void destroy(void *self) {
  dataset *d = self;
  for (int s = 0; s < 3; s++) {
    free(d->x[s]);
    free(d->y[s]);
  }
  free(d->order);
  free(d->bx);
  free(d->by);
  free(d);
}

/* Draws split S from the host's generator. create runs in the same order
 * on every run of a config, so the samples are the same every time, a
 * resumed run included. */
static void draw(dataset *d, lk_rng *rng, int s, double noise) {
  for (size_t i = 0; i < d->n[s]; i++) {
    double y = 0.5;
    for (size_t f = 0; f < d->inputs; f++) {
      double x = lk_rng_normal(rng), w = (double)(f + 1);
      d->x[s][i * d->inputs + f] = (float)x;
      y += (f % 2 ? -w : w) * x;
    }
    d->y[s][i] = (float)(y + noise * lk_rng_normal(rng));
  }
}

/* The host has held every count and the noise to their ranges (the
 * options table, below) before create. */
static int create(lk_host *host, const lk_options *opts, void **self) {
  static const char *const counts[] = {"n_train", "n_val", "n_test"};
  double noise = lk_opt_double(opts, "noise");
  dataset *d = calloc(1, sizeof *d);
  if (!d)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  d->host = host;
  d->inputs = (size_t)lk_opt_int(opts, "inputs");
  d->batch_size = (size_t)lk_opt_int(opts, "batch_size");
  d->shuffle = lk_opt_bool(opts, "shuffle");
  bool ok = true;
  for (int s = 0; s < 3; s++) {
    d->n[s] = (size_t)lk_opt_int(opts, counts[s]);
    d->x[s] = malloc((d->n[s] * d->inputs + 1) * sizeof(float));
    d->y[s] = malloc((d->n[s] + 1) * sizeof(float));
    ok = ok && d->x[s] && d->y[s];
  }
  d->order = malloc(d->n[LK_SPLIT_TRAIN] * sizeof *d->order);
  d->bx = malloc(d->batch_size * d->inputs * sizeof *d->bx);
  d->by = malloc(d->batch_size * sizeof *d->by);
  if (!ok || !d->order || !d->bx || !d->by) {
    destroy(d);
    return lk_fail(host, LK_ENOMEM, "out of memory for %zu samples",
                   d->n[0] + d->n[1] + d->n[2]);
  }
  lk_rng *rng = lk_host_rng(host);
  for (int s = 0; s < 3; s++)
    draw(d, rng, s, noise);
  lk_log(host, LK_LOG_INFO,
         "%zu training, %zu validation, %zu test samples of %zu inputs",
         d->n[0], d->n[1], d->n[2], d->inputs);
  *self = d;
  return 0;
}

/* epoch: the loop starts epoch EPOCH of SPLIT (training every epoch;
 * validation after each, test once at the end) and asks how many batches
 * it has; 0 means the split does not exist (no val_loss then). The
 * training order is shuffled here, from a generator seeded with the run's
 * seed and the epoch: a run resumed in the middle of an epoch sees the
 * same order again. */
static int epoch(void *self, lk_split split, uint64_t ep, size_t *n_batches) {
  dataset *d = self;
  size_t n = d->n[split];
  *n_batches = (n + d->batch_size - 1) / d->batch_size; /* the last short */
  if (split != LK_SPLIT_TRAIN)
    return 0;
  for (size_t i = 0; i < n; i++)
    d->order[i] = i;
  if (!d->shuffle)
    return 0;
  lk_rng rng;
  lk_rng_seed(&rng, lk_host_seed(d->host), SHUFFLE_STREAM + ep);
  for (size_t i = n; i > 1; i--) { /* Fisher-Yates */
    size_t j = (size_t)(lk_rng_u64(&rng) % i), t = d->order[i - 1];
    d->order[i - 1] = d->order[j];
    d->order[j] = t;
  }
  return 0;
}

/* batch: fills batch INDEX of SPLIT's current epoch. The tensors point into
 * our buffers: they stay ours, valid until our next call, and the model
 * only reads them (grad is NULL). */
static int batch(void *self, lk_split split, size_t index, lk_batch *out) {
  dataset *d = self;
  size_t first = index * d->batch_size, n = d->n[split];
  if (first >= n)
    return lk_fail(d->host, LK_EINVAL, "batch %zu of a split of %zu samples",
                   index, n);
  size_t size = n - first < d->batch_size ? n - first : d->batch_size;
  for (size_t i = 0; i < size; i++) {
    size_t row = split == LK_SPLIT_TRAIN ? d->order[first + i] : first + i;
    memcpy(d->bx + i * d->inputs, d->x[split] + row * d->inputs,
           d->inputs * sizeof *d->bx);
    d->by[i] = d->y[split][row];
  }
  out->split = split;
  out->index = index;
  out->size = size;
  out->x = (lk_tensor){.name = "x",
                       .dtype = LK_F32,
                       .ndim = 2,
                       .shape = {size, d->inputs},
                       .numel = size * d->inputs,
                       .data = d->bx};
  out->y = (lk_tensor){.name = "y",
                       .dtype = LK_F32,
                       .ndim = 1,
                       .shape = {size},
                       .numel = size,
                       .data = d->by};
  return 0;
}

/* shape: what one training sample looks like, asked when the run is set
 * up (data is created first, so a model's create can ask for it with
 * lk_host_data_shape): x is f32 [inputs], y one f32 target per sample
 * (y_ndim 0), and no class labels (n_classes 0). */
static int shape(void *self, lk_sample_shape *out) {
  const dataset *d = self;
  *out = (lk_sample_shape){.x_dtype = LK_F32,
                           .x_ndim = 1,
                           .x_shape = {d->inputs},
                           .y_dtype = LK_F32,
                           .y_ndim = 0};
  return 0;
}

/* The last field is each number's range: the host refuses a value outside
 * it before create, naming the option ("n_train = 0: must be >= 1"). */
static const lk_option options[] = {
    {"inputs", LK_OPT_INT, "3", "features per sample (the model's inputs)",
     "[1, 4096]"},
    {"n_train", LK_OPT_INT, "256", "training samples", "[1, 1000000]"},
    {"n_val", LK_OPT_INT, "64", "validation samples (0: no validation)",
     "[0, 1000000]"},
    {"n_test", LK_OPT_INT, "64", "test samples (0: no test)", "[0, 1000000]"},
    {"batch_size", LK_OPT_INT, "32", "samples per batch", "[1, 1000000]"},
    {"shuffle", LK_OPT_BOOL, "true",
     "a new order of the training samples every epoch", NULL},
    {"noise", LK_OPT_DOUBLE, "0.01", "standard deviation of the noise on y",
     "[0, 1e6]"},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_data_ops data_ops = {
    .epoch = epoch, .batch = batch, .shape = shape};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION, /* the ABI this file was compiled for */
    .size = sizeof(lk_descriptor),
    .name = "@NAME@", /* its [section] in a config */
    .version = "0.1",
    .summary = "synthetic regression data, y = w . x + 0.5 + noise",
    .options = options,
    .create = create,
    .destroy = destroy,
    .data = &data_ops,
};

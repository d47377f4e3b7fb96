/* synthetic: a small regression data set drawn from the host's seeded
 * generator, with train, validation and test splits. It exercises the data
 * ABI: per-epoch shuffling, a short last batch, splits that may be empty. */
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

typedef struct synthetic {
  size_t features, batch_size, n[3];
  bool shuffle;
  uint64_t seed;
  double *x[3], *y[3];
  size_t *order;   /* of the training split */
  double *bx, *by; /* the batch handed out */
} synthetic;

static void destroy(void *self) {
  synthetic *s = self;
  for (int k = 0; k < 3; k++) {
    free(s->x[k]);
    free(s->y[k]);
  }
  free(s->order);
  free(s->bx);
  free(s->by);
  free(s);
}

static int create(lk_host *host, const lk_options *o, void **self) {
  synthetic *s = calloc(1, sizeof *s);
  if (!s)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  s->features = (size_t)lk_opt_int(o, "features");
  s->batch_size = (size_t)lk_opt_int(o, "batch_size");
  s->n[LK_SPLIT_TRAIN] = (size_t)lk_opt_int(o, "n_train");
  s->n[LK_SPLIT_VAL] = (size_t)lk_opt_int(o, "n_val");
  s->n[LK_SPLIT_TEST] = (size_t)lk_opt_int(o, "n_test");
  s->shuffle = lk_opt_bool(o, "shuffle");
  s->seed = lk_host_seed(host);
  if (s->features < 1 || s->batch_size < 1 || s->n[0] < 1) {
    free(s);
    return lk_fail(host, LK_ECONFIG,
                   "features, batch_size and n_train must be >= 1");
  }
  lk_rng *rng = lk_host_rng(host);
  double noise = lk_opt_double(o, "noise");
  for (int k = 0; k < 3; k++) {
    s->x[k] = calloc(s->n[k] * s->features + 1, sizeof(double));
    s->y[k] = calloc(s->n[k] + 1, sizeof(double));
    if (!s->x[k] || !s->y[k]) {
      destroy(s);
      return lk_fail(host, LK_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < s->n[k]; i++) {
      double y = 0.5;
      for (size_t f = 0; f < s->features; f++) {
        double x = lk_rng_normal(rng);
        s->x[k][i * s->features + f] = x;
        y += x * (double)(f % 2 ? -(double)(f + 1) : (double)(f + 1));
      }
      s->y[k][i] = y + noise * lk_rng_normal(rng);
    }
  }
  s->order = calloc(s->n[0], sizeof *s->order);
  s->bx = calloc(s->batch_size * s->features, sizeof(double));
  s->by = calloc(s->batch_size, sizeof(double));
  if (!s->order || !s->bx || !s->by) {
    destroy(s);
    return lk_fail(host, LK_ENOMEM, "out of memory");
  }
  *self = s;
  return 0;
}

static int epoch(void *self, lk_split split, uint64_t ep, size_t *n_batches) {
  synthetic *s = self;
  size_t n = s->n[split];
  *n_batches = (n + s->batch_size - 1) / s->batch_size;
  if (split != LK_SPLIT_TRAIN)
    return 0;
  for (size_t i = 0; i < n; i++)
    s->order[i] = i;
  if (s->shuffle) { /* Fisher-Yates from a stream of the run's seed */
    lk_rng r;
    lk_rng_seed(&r, s->seed, 1000 + ep);
    for (size_t i = n; i > 1; i--) {
      size_t j = (size_t)(lk_rng_u64(&r) % i), t = s->order[i - 1];
      s->order[i - 1] = s->order[j];
      s->order[j] = t;
    }
  }
  return 0;
}

static int batch(void *self, lk_split split, size_t index, lk_batch *out) {
  synthetic *s = self;
  size_t first = index * s->batch_size, n = s->n[split];
  if (first >= n)
    return LK_EINVAL;
  size_t size = n - first < s->batch_size ? n - first : s->batch_size;
  for (size_t i = 0; i < size; i++) {
    size_t row = split == LK_SPLIT_TRAIN ? s->order[first + i] : first + i;
    memcpy(s->bx + i * s->features, s->x[split] + row * s->features,
           s->features * sizeof(double));
    s->by[i] = s->y[split][row];
  }
  out->split = split;
  out->index = index;
  out->size = size;
  out->x = (lk_tensor){.name = "x",
                       .dtype = LK_F64,
                       .ndim = 2,
                       .shape = {size, s->features},
                       .numel = size * s->features,
                       .data = s->bx};
  out->y = (lk_tensor){.name = "y",
                       .dtype = LK_F64,
                       .ndim = 1,
                       .shape = {size},
                       .numel = size,
                       .data = s->by};
  return 0;
}

static const lk_option options[] = {
    {"features", LK_OPT_INT, "3", "inputs per sample", NULL},
    {"n_train", LK_OPT_INT, "64", "training samples", NULL},
    {"n_val", LK_OPT_INT, "16", "validation samples (0: no split)", NULL},
    {"n_test", LK_OPT_INT, "16", "test samples (0: no split)", NULL},
    {"batch_size", LK_OPT_INT, "8", "samples per batch", NULL},
    {"shuffle", LK_OPT_BOOL, "false", "shuffle the training split per epoch",
     NULL},
    {"noise", LK_OPT_DOUBLE, "0.01", "standard deviation of label noise", NULL},
    {NULL, 0, NULL, NULL, NULL}};

#if LK_ABI_MINOR >= 4
static int shape(void *self, lk_sample_shape *out) {
  synthetic *s = self;
  *out = (lk_sample_shape){.x_dtype = LK_F64,
                           .x_ndim = 1,
                           .x_shape = {s->features},
                           .y_dtype = LK_F64};
  return 0;
}
#endif

static const lk_data_ops data_ops = {
    .epoch = epoch,
    .batch = batch,
#if LK_ABI_MINOR >= 4
    .shape = shape,
#endif
};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "synthetic",
    .version = "1.0",
    .summary = "test data: y = x.w + 0.5 + noise, three splits",
    .options = options,
    .create = create,
    .destroy = destroy,
    .data = &data_ops,
};

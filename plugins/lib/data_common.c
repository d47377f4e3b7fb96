/* The samples, splits and batches of the data plugins (data_common.h). */
#include "data_common.h"

void data_destroy(void *self) {
  data_set *d = self;
  if (!d)
    return;
  for (int k = 0; k < 2; k++) {
    free(d->file[k].x);
    free(d->file[k].y);
  }
  for (int s = 0; s < 3; s++)
    free(d->rows[s]);
  free(d->order);
  free(d->bx);
  free(d->by);
  free(d);
}

int data_new(lk_host *host, const lk_options *o, data_set **out) {
  int64_t bs = lk_opt_int(o, "batch_size"), limit = lk_opt_int(o, "limit");
  double vs = lk_opt_double(o, "val_split");
  const char *norm = lk_opt_string(o, "normalize");
  data_set *d = calloc(1, sizeof *d);
  if (!d)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  d->host = host;
  d->batch_size = (size_t)bs;
  d->limit = (size_t)limit;
  d->val_split = vs;
  d->shuffle = lk_opt_bool(o, "shuffle");
  d->drop_last = lk_opt_bool(o, "drop_last");
  d->normalize = strcmp(norm, "standard") == 0 ? DATA_NORM_STANDARD
                 : strcmp(norm, "scale") == 0  ? DATA_NORM_SCALE
                                               : DATA_NORM_NONE;
  d->seed = lk_host_seed(host);
  *out = d;
  return 0;
}

int data_alloc(data_set *d, int k, size_t n) {
  size_t f = d->features ? d->features : 1, m = n ? n : 1, bytes;
  if (!lk_size_mul(m, f, &bytes) || !lk_size_mul(bytes, sizeof(float), &bytes))
    return lk_fail(d->host, LK_ENOMEM, "%zu samples of %zu features: too big",
                   n, f);
  float *x = realloc(d->file[k].x, bytes);
  if (x)
    d->file[k].x = x;
  void *y = realloc(d->file[k].y, m * 4); /* int32_t and float alike */
  if (y)
    d->file[k].y = y;
  if (!x || !y)
    return lk_fail(d->host, LK_ENOMEM, "out of memory for %zu samples", n);
  return 0;
}

/* Fisher-Yates over A[0..n) from stream STREAM of the run's seed. The
 * modulo's bias is below 2^-40 for any n a data set can have. */
static void data_permute(size_t *a, size_t n, uint64_t seed, uint64_t stream) {
  lk_rng r;
  lk_rng_seed(&r, seed, stream);
  for (size_t i = n; i > 1; i--) {
    size_t j = (size_t)(lk_rng_u64(&r) % i), t = a[i - 1];
    a[i - 1] = a[j];
    a[j] = t;
  }
}

/* Per-feature statistics over the training rows, in double; then every
 * sample in use (training file and test file) is normalized with them. */
static int data_normalize(data_set *d, int mode) {
  size_t f = d->features, n = d->n[LK_SPLIT_TRAIN];
  const size_t *rows = d->rows[LK_SPLIT_TRAIN];
  double *a = calloc(2 * f, sizeof *a), *b = a + f;
  if (!a)
    return lk_fail(d->host, LK_ENOMEM, "out of memory");
  const float *x0 = d->file[0].x;
  if (mode == DATA_NORM_STANDARD) { /* a = mean, b = 1 / std (or 1) */
    for (size_t i = 0; i < n; i++)
      for (size_t j = 0; j < f; j++)
        a[j] += x0[rows[i] * f + j];
    for (size_t j = 0; j < f; j++)
      a[j] /= (double)n;
    for (size_t i = 0; i < n; i++)
      for (size_t j = 0; j < f; j++) {
        double e = x0[rows[i] * f + j] - a[j];
        b[j] += e * e;
      }
    for (size_t j = 0; j < f; j++) {
      double sd = sqrt(b[j] / (double)n); /* population std, as sklearn */
      b[j] = sd > 0 ? 1.0 / sd : 1.0;     /* constant feature: only centred */
    }
  } else { /* min-max: a = min, b = 1 / (max - min) (or 1) */
    for (size_t j = 0; j < f; j++)
      a[j] = b[j] = x0[rows[0] * f + j];
    for (size_t i = 1; i < n; i++)
      for (size_t j = 0; j < f; j++) {
        double v = x0[rows[i] * f + j];
        a[j] = v < a[j] ? v : a[j];
        b[j] = v > b[j] ? v : b[j];
      }
    for (size_t j = 0; j < f; j++)
      b[j] = b[j] > a[j] ? 1.0 / (b[j] - a[j]) : 1.0;
  }
  /* Samples outside the training part (validation, test) can land beyond
   * f32: 3e38 with a training std of 1e-45 is inf, which the reader had
   * kept out of training by refusing non-finite cells. */
  for (int k = 0; k < 2; k++) {
    float *x = d->file[k].x;
    for (size_t i = 0; i < d->file[k].n; i++)
      for (size_t j = 0; j < f; j++) {
        float v = (float)((x[i * f + j] - a[j]) * b[j]);
        if (!isfinite(v)) {
          int rc = lk_fail(
              d->host, LK_EFORMAT,
              "%s: feature %zu of sample %zu, %g, is not finite once "
              "normalized (normalize = %s) with the training part's %s %g "
              "and %s %g",
              d->file[k].path ? d->file[k].path : "?", j + 1, i + 1,
              (double)x[i * f + j],
              mode == DATA_NORM_STANDARD ? "standard" : "scale",
              mode == DATA_NORM_STANDARD ? "mean" : "min", a[j],
              mode == DATA_NORM_STANDARD ? "1/std" : "1/(max - min)", b[j]);
          free(a);
          return rc;
        }
        x[i * f + j] = v;
      }
  }
  free(a);
  return 0;
}

size_t data_part(double fraction, size_t n) {
  size_t k = fraction > 0 ? (size_t)llround(fraction * (double)n) : 0;
  return fraction > 0 && k == 0 ? 1 : k;
}

int data_splits(data_set *d, size_t n, size_t n_val, size_t n_test,
                size_t file_val, size_t file_test) {
  if (n_val >= n && !n_test)
    return lk_fail(d->host, LK_ECONFIG,
                   "val_split = %g of %zu training samples leaves none "
                   "for training",
                   d->val_split, n);
  if (n_test && n_val + n_test >= n)
    return lk_fail(d->host, LK_ECONFIG,
                   "test_split = %g and val_split = %g of %zu samples (%zu "
                   "and %zu) leave none for training",
                   d->test_split, d->val_split, n, n_test, n_val);
  d->test_held = n_test > 0;
  d->n[LK_SPLIT_TRAIN] = n - n_val - n_test;
  d->n[LK_SPLIT_VAL] = n_val + file_val;
  d->n[LK_SPLIT_TEST] = n_test + file_test;
  if (d->drop_last && d->n[LK_SPLIT_TRAIN] < d->batch_size)
    return lk_fail(d->host, LK_ECONFIG,
                   "drop_last with batch_size = %zu leaves no batch of the "
                   "%zu training samples",
                   d->batch_size, d->n[LK_SPLIT_TRAIN]);
  return 0;
}

int data_rows(data_set *d, size_t n, size_t n_val, size_t n_test,
              const bool from_file[3], size_t y_numel) {
  for (int s = 0; s < 3; s++)
    if (!(d->rows[s] = malloc((d->n[s] ? d->n[s] : 1) * sizeof(size_t))))
      return lk_fail(d->host, LK_ENOMEM, "out of memory");
  /* A batch never holds more samples than the largest split, whatever
   * batch_size says: sized by batch_size alone, a batch_size of 2^62 made
   * the product overflow into a small buffer. */
  size_t most = d->n[LK_SPLIT_TRAIN];
  for (int s = 1; s < 3; s++)
    most = d->n[s] > most ? d->n[s] : most;
  size_t rows = d->batch_size < most ? d->batch_size : most, bytes;
  size_t width = d->features > y_numel ? d->features : y_numel;
  if (!lk_size_mul(rows, width, &bytes) ||
      !lk_size_mul(bytes, sizeof(float), &bytes))
    return lk_fail(d->host, LK_ENOMEM, "batches of %zu x %zu: too big", rows,
                   width);
  d->order = malloc(n * sizeof(size_t));
  d->bx = malloc(rows * d->features * sizeof(float)); /* <= bytes */
  d->by = malloc(rows * y_numel * 4);
  unsigned char *held = calloc(n, 1);
  if (!d->order || !d->bx || !d->by || !held) {
    free(held);
    return lk_fail(d->host, LK_ENOMEM, "out of memory");
  }
  /* The held-out samples: the first n_val of a fixed permutation for
   * validation, its last n_test for the test (so that test_split leaves
   * the validation samples as they were). Every part is then listed in
   * file order, so that without shuffling the training split reads the
   * file in order. */
  for (size_t i = 0; i < n; i++)
    d->order[i] = i;
  if (n_val || n_test) {
    data_permute(d->order, n, d->seed, DATA_STREAM_VAL);
    for (size_t i = 0; i < n_val; i++)
      held[d->order[i]] = LK_SPLIT_VAL;
    for (size_t i = n - n_test; i < n; i++)
      held[d->order[i]] = LK_SPLIT_TEST;
  }
  size_t at[3] = {0, 0, 0};
  for (size_t i = 0; i < n; i++)
    d->rows[held[i]][at[held[i]]++] = i;
  free(held);
  for (int s = 1; s < 3; s++)
    for (size_t i = 0; from_file[s] && i < d->n[s]; i++)
      d->rows[s][i] = i;
  memcpy(d->order, d->rows[LK_SPLIT_TRAIN],
         d->n[LK_SPLIT_TRAIN] * sizeof(size_t));
  return 0;
}

int data_setup(data_set *d, int norm) {
  data_file *tr = &d->file[0];
  if (d->limit && d->limit < tr->n)
    tr->n = d->limit;
  size_t n = tr->n;
  if (n == 0)
    return lk_fail(d->host, LK_EINVAL, "no training samples");
  if (d->test_split > 0 && d->file[1].n)
    return lk_fail(d->host, LK_ECONFIG,
                   "test_split = %g with a test file: the test split comes "
                   "from one or the other",
                   d->test_split);
  size_t n_val = data_part(d->val_split, n);
  size_t n_test = data_part(d->test_split, n);
  bool from_file[3] = {false, false, n_test == 0};
  int rc = data_splits(d, n, n_val, n_test, 0, n_test ? 0 : d->file[1].n);
  if (rc == 0)
    rc = data_rows(d, n, n_val, n_test, from_file, 1);
  if (rc != 0)
    return rc;
  return norm == DATA_NORM_NONE ? 0 : data_normalize(d, norm);
}

size_t data_batches(const data_set *d, lk_split split) {
  size_t n = d->n[split], bs = d->batch_size;
  return split == LK_SPLIT_TRAIN && d->drop_last ? n / bs : (n + bs - 1) / bs;
}

/* Whether SPLIT is one of the three (the caller returns LK_EINVAL if not:
 * spelled out so that compilers see the bound). */
static bool data_split_ok(const data_set *d, lk_split split) {
  if ((unsigned)split <= LK_SPLIT_TEST)
    return true;
  lk_fail(d->host, LK_EINVAL, "no split number %d", (int)split);
  return false;
}

int data_shape(void *self, lk_sample_shape *out) {
  const data_set *d = self;
  *out = (lk_sample_shape){.x_dtype = LK_F32, .y_dtype = d->y_dtype};
  out->x_ndim = d->x_ndim ? d->x_ndim : 1;
  for (size_t i = 0; i < out->x_ndim; i++)
    out->x_shape[i] = d->x_ndim ? d->x_shape[i] : d->features;
  if (d->y_dtype == LK_I32)
    for (int k = 0; k < 2; k++)
      for (size_t i = 0; i < d->file[k].n; i++) {
        int32_t v = ((const int32_t *)d->file[k].y)[i];
        if (v >= 0 && (size_t)v + 1 > out->n_classes)
          out->n_classes = (size_t)v + 1;
      }
  return 0;
}

int data_epoch(void *self, lk_split split, uint64_t epoch, size_t *n_batches) {
  data_set *d = self;
  if (!data_split_ok(d, split))
    return LK_EINVAL;
  d->epoch[split] = epoch;
  *n_batches = data_batches(d, split);
  if (split == LK_SPLIT_TRAIN) {
    size_t n = d->n[split];
    memcpy(d->order, d->rows[split], n * sizeof(size_t));
    if (d->shuffle)
      data_permute(d->order, n, d->seed, DATA_STREAM_SHUFFLE + epoch);
  }
  return 0;
}

int data_check_batch(lk_host *host, lk_split split, size_t index, size_t nb) {
  if (index < nb)
    return 0;
  return lk_fail(host, LK_EINVAL,
                 "batch %zu of the %s split does not exist (it has %zu)", index,
                 split == LK_SPLIT_TRAIN ? "training"
                 : split == LK_SPLIT_VAL ? "validation"
                                         : "test",
                 nb);
}

lk_tensor data_tensor(const char *name, lk_dtype dtype, size_t size,
                      size_t ndim, const size_t *shape, void *data) {
  lk_tensor t = {.name = name,
                 .dtype = dtype,
                 .ndim = 1 + ndim,
                 .shape = {size},
                 .numel = size,
                 .data = data};
  for (size_t i = 0; i < ndim; i++) {
    t.shape[1 + i] = shape[i];
    t.numel *= shape[i];
  }
  return t;
}

lk_batch data_batch_of(lk_split split, uint64_t epoch, size_t index,
                       lk_tensor x, lk_tensor y) {
  return (lk_batch){.split = split,
                    .epoch = epoch,
                    .index = index,
                    .size = x.shape[0],
                    .x = x,
                    .y = y};
}

int data_batch_rows(const data_set *d, lk_split split, size_t index,
                    const size_t **rows, size_t *size) {
  if (!data_split_ok(d, split))
    return LK_EINVAL;
  int rc = data_check_batch(d->host, split, index, data_batches(d, split));
  if (rc != 0)
    return rc;
  size_t first = index * d->batch_size, left = d->n[split] - first;
  *rows = (split == LK_SPLIT_TRAIN ? d->order : d->rows[split]) + first;
  *size = left < d->batch_size ? left : d->batch_size;
  return 0;
}

int data_batch(void *self, lk_split split, size_t index, lk_batch *out) {
  data_set *d = self;
  const size_t *rows;
  size_t size, f = d->features;
  int rc = data_batch_rows(d, split, index, &rows, &size);
  if (rc != 0)
    return rc;
  const data_file *src =
      &d->file[split == LK_SPLIT_TEST && !d->test_held ? 1 : 0];
  for (size_t i = 0; i < size; i++)
    memcpy(d->bx + i * f, src->x + rows[i] * f, f * sizeof(float));
  if (d->y_dtype == LK_I32)
    for (size_t i = 0; i < size; i++)
      ((int32_t *)d->by)[i] = ((const int32_t *)src->y)[rows[i]];
  else
    for (size_t i = 0; i < size; i++)
      ((float *)d->by)[i] = ((const float *)src->y)[rows[i]];
  *out = data_batch_of(split, d->epoch[split], index,
                       data_tensor("x", LK_F32, size, 1, &f, d->bx),
                       data_tensor("y", d->y_dtype, size, 0, NULL, d->by));
  return 0;
}

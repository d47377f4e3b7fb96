/* declared: a data plugin that says its samples have whatever shape its
 * options give, as a foreign plugin may: x_shape = 65536,65536 (2^32
 * values a sample, which a product in int wraps to 0), four dimensions of
 * 2^24 (more values than a size_t counts), a dimension of 0. It has no
 * samples: what a model makes of the declaration at create is what the
 * tests look at. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

typedef struct declared {
  lk_host *host;
  lk_sample_shape shape;
} declared;

/* "65536,65536" into DIMS; how many, or -1. Up to 8, so that more than
 * LK_MAX_DIMS can be declared too. */
static int parse_dims(const char *s, size_t *dims, size_t max) {
  size_t n = 0;
  while (*s && n < max) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno)
      return -1;
    dims[n++] = (size_t)v;
    s = *end == ',' ? end + 1 : end;
    if (*end && *end != ',')
      return -1;
  }
  return *s ? -1 : (int)n;
}

static int create(lk_host *host, const lk_options *o, void **self) {
  declared *d = calloc(1, sizeof *d);
  if (!d)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  d->host = host;
  size_t x[8] = {0};
  const char *xs = lk_opt_string(o, "x_shape");
  int nx = parse_dims(xs, x, 8);
  if (nx < 0) {
    free(d);
    return lk_fail(host, LK_ECONFIG, "x_shape = \"%s\": expected N,N,...", xs);
  }
  const char *dt = lk_opt_string(o, "x_dtype");
  d->shape.x_dtype = strcmp(dt, "i32") == 0 ? LK_I32 : LK_F32;
  d->shape.x_ndim = (size_t)nx;
  memcpy(d->shape.x_shape, x, LK_MAX_DIMS * sizeof x[0]);
  d->shape.y_dtype = LK_I32;
  d->shape.n_classes = (size_t)lk_opt_int(o, "classes");
  *self = d;
  return 0;
}

static void destroy(void *self) {
  free(self);
}

static int epoch(void *self, lk_split split, uint64_t e, size_t *n) {
  (void)self;
  (void)e;
  *n = split == LK_SPLIT_TRAIN ? 1 : 0;
  return 0;
}

static int batch(void *self, lk_split split, size_t index, lk_batch *out) {
  declared *d = self;
  (void)split;
  (void)index;
  (void)out;
  return lk_fail(d->host, LK_EINVAL, "declared has no samples, only a shape");
}

static int shape(void *self, lk_sample_shape *out) {
  const declared *d = self;
  *out = d->shape;
  return 0;
}

static const lk_option options[] = {
    {"x_shape", LK_OPT_STRING, "4", "a sample's shape, N,N,... (up to 8)",
     NULL},
    {"x_dtype", LK_OPT_ENUM, "f32", "a sample's dtype", "f32|i32"},
    {"classes", LK_OPT_INT, "2", "classes of the labels", "[1, inf)"},
    {NULL, 0, NULL, NULL, NULL}};
static const lk_data_ops ops = {.epoch = epoch, .batch = batch, .shape = shape};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "declared",
    .version = "1.0",
    .summary = "test data plugin declaring any sample shape, with no samples",
    .options = options,
    .create = create,
    .destroy = destroy,
    .data = &ops,
};

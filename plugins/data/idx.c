/* idx: the MNIST layout of IDX files (Fashion-MNIST by default), each file
 * gzip-compressed or not: train-images-idx3-ubyte and train-labels-idx1-ubyte
 * for training (and validation, with val_split), the t10k pair for the test
 * split. Images become f32 rows of rows*cols features once, at create, so
 * that a batch is a copy; labels are LK_I32. zlib reads plain files as they
 * are, so one reader serves both. */
#include <stdio.h>
#include <sys/stat.h>

#include "bundled.h"
#include "data_common.h"
#include "gz_read.h"

#define IDX_IMAGES 0x00000803u /* unsigned bytes, 3 dimensions */
#define IDX_LABELS 0x00000801u /* unsigned bytes, 1 dimension */

enum { TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS };
static const char *const base_names[4] = {
    "train-images-idx3-ubyte", "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

/* One file as read: its path, the header's dimensions and the payload. */
typedef struct idx_file {
  char *path;
  uint32_t dims[3];
  unsigned char *bytes;
} idx_file;

static char *join(const char *dir, const char *base, const char *suffix) {
  size_t len = strlen(dir) + strlen(base) + strlen(suffix) + 2;
  char *p = malloc(len);
  if (p)
    snprintf(p, len, "%s/%s%s", dir, base, suffix);
  return p;
}

static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}

/* DIR/BASE or else DIR/BASE.gz: whichever exists, the plain one first
 * (it needs no decompression). */
static int find(lk_host *host, const char *dir, const char *base, char **out) {
  char *plain = join(dir, base, ""), *gz = join(dir, base, ".gz");
  int rc = 0;
  if (!plain || !gz)
    rc = lk_fail(host, LK_ENOMEM, "out of memory");
  else if (exists(plain))
    *out = plain, plain = NULL;
  else if (exists(gz))
    *out = gz, gz = NULL;
  else {
    struct stat st;
    bool no_dir = stat(dir, &st) != 0 || !S_ISDIR(st.st_mode);
    rc = lk_fail(host, LK_ENOTFOUND, "cannot find %s: tried %s and %s%s%s%s",
                 base, plain, gz, no_dir ? " (dir = " : "", no_dir ? dir : "",
                 no_dir ? " is not a directory)" : "");
  }
  free(plain);
  free(gz);
  return rc;
}

/* Reads the LEN bytes after the header into a new *OUT, grown as bytes
 * arrive: a header that promises more than the file holds then costs
 * memory for what is there only (it used to allocate all LEN bytes first,
 * up to 1 TiB for a 100-byte file). *GOT says how many came. */
static int read_payload(lk_host *host, gzFile f, const char *path, size_t len,
                        unsigned char **out, size_t *got) {
  size_t cap = len < (1u << 20) ? len : (1u << 20), n = 0;
  unsigned char *buf = malloc(cap ? cap : 1);
  int rc = buf ? 0 : lk_fail(host, LK_ENOMEM, "out of memory for %s", path);
  *got = 0;
  while (rc == 0) {
    rc = gz_read_up_to(host, f, path, buf + *got, cap - *got, &n);
    *got += n;
    if (rc != 0 || *got < cap || cap == len)
      break;
    size_t grown = cap > len / 2 ? len : 2 * cap;
    unsigned char *more = realloc(buf, grown);
    if (!more)
      rc = lk_fail(host, LK_ENOMEM, "out of memory for %s", path);
    else
      buf = more, cap = grown;
  }
  *out = buf;
  return rc;
}

/* The payload's size from the header, or false past 1 TiB (a foreign or
 * corrupt header: three factors could overflow even 64 bits). */
static bool payload_of(const uint32_t *dims, size_t ndim, size_t *out) {
  size_t t = 1;
  for (size_t i = 0; i < ndim; i++)
    if (!lk_size_mul(t, dims[i], &t) || (uint64_t)t > (uint64_t)1 << 40)
      return false;
  *out = t;
  return true;
}

/* Reads and checks one IDX file of unsigned bytes with MAGIC. */
static int read_idx(lk_host *host, idx_file *file, uint32_t magic) {
  size_t ndim = magic & 0xff, head_len = 4 + 4 * ndim;
  const char *path = file->path, *what = ndim == 3 ? "images" : "labels";
  gzFile f = NULL;
  bool gz = false;
  int rc = gz_open(host, path, what, &f, &gz);
  if (rc != 0)
    return rc;
  unsigned char head[16];
  size_t got = 0;
  rc = gz_read_up_to(host, f, path, head, head_len, &got);
  if (rc == 0 && got < head_len)
    rc = lk_fail(host, LK_EFORMAT,
                 "%s is truncated: %zu bytes, an IDX header of %s needs %zu",
                 path, got, what, head_len);
  uint32_t found = 0;
  for (size_t i = 0; rc == 0 && i < 1 + ndim; i++) {
    uint32_t v = (uint32_t)head[4 * i] << 24 | (uint32_t)head[4 * i + 1] << 16 |
                 (uint32_t)head[4 * i + 2] << 8 | head[4 * i + 3];
    if (i == 0)
      found = v;
    else
      file->dims[i - 1] = v;
  }
  if (rc == 0 && found != magic)
    rc = lk_fail(host, LK_EFORMAT,
                 "%s: magic number 0x%08x, expected 0x%08x (IDX %s: unsigned "
                 "bytes, %zu dimension%s)",
                 path, found, magic, what, ndim, ndim > 1 ? "s" : "");
  if (rc == 0 && ndim == 3 && (file->dims[1] == 0 || file->dims[2] == 0))
    rc = lk_fail(host, LK_EFORMAT, "%s: images of %u x %u pixels", path,
                 file->dims[1], file->dims[2]);
  size_t payload = 0;
  if (rc == 0 && !payload_of(file->dims, ndim, &payload))
    rc = lk_fail(host, LK_EFORMAT,
                 "%s: the header's dimensions (%u x %u x %u) are too big", path,
                 file->dims[0], ndim > 1 ? file->dims[1] : 1,
                 ndim > 2 ? file->dims[2] : 1);
  if (rc == 0)
    rc = read_payload(host, f, path, payload, &file->bytes, &got);
  unsigned long long expected = head_len + payload;
  if (rc == 0 && got < payload)
    rc = lk_fail(host, LK_EFORMAT,
                 "%s is truncated: its header promises %llu bytes, the file "
                 "has %llu%s",
                 path, expected, (unsigned long long)(head_len + got),
                 gz ? " (uncompressed)" : "");
  if (rc == 0) { /* anything after the data is a sign of a wrong header */
    unsigned char rest[4096];
    unsigned long long extra = 0;
    do {
      rc = gz_read_up_to(host, f, path, rest, sizeof rest, &got);
      extra += got;
    } while (rc == 0 && got == sizeof rest);
    if (rc == 0 && extra)
      rc = lk_fail(host, LK_EFORMAT,
                   "%s has %llu bytes%s, its header says %llu: trailing data",
                   path, expected + extra, gz ? " (uncompressed)" : "",
                   expected);
  }
  gzclose(f);
  return rc;
}

/* Images and labels of one split, read, checked against each other and
 * stored in file K of D (the first LIMIT samples, if LIMIT). */
static int load(data_set *d, idx_file *im, idx_file *lb, int k, size_t limit,
                bool scale) {
  int rc = read_idx(d->host, im, IDX_IMAGES);
  if (rc == 0)
    rc = read_idx(d->host, lb, IDX_LABELS);
  if (rc != 0)
    return rc;
  if (im->dims[0] != lb->dims[0])
    return lk_fail(d->host, LK_EFORMAT, "%s has %u images but %s has %u labels",
                   im->path, im->dims[0], lb->path, lb->dims[0]);
  size_t f = 0; /* rows x columns: the header's payload check bounds it */
  if (!lk_size_mul(im->dims[1], im->dims[2], &f))
    return lk_fail(d->host, LK_EFORMAT, "%s: images of %u x %u pixels",
                   im->path, im->dims[1], im->dims[2]);
  if (k == 0) { /* one channel of rows x columns, as torchvision's */
    d->features = f;
    d->x_ndim = 3;
    d->x_shape[0] = 1;
    d->x_shape[1] = im->dims[1];
    d->x_shape[2] = im->dims[2];
  } else if (f != d->features)
    return lk_fail(d->host, LK_EFORMAT,
                   "%s has images of %u x %u pixels, the training images have "
                   "%zu pixels",
                   im->path, im->dims[1], im->dims[2], d->features);
  size_t n = im->dims[0];
  if (n == 0)
    return lk_fail(d->host, LK_EFORMAT, "%s has no images", im->path);
  if (limit && limit < n)
    n = limit;
  if ((rc = data_alloc(d, k, n)) != 0)
    return rc;
  float *x = d->file[k].x;
  int32_t *y = d->file[k].y;
  const unsigned char *px = im->bytes;
  if (scale) /* as torchvision's ToTensor: a division, not a product */
    for (size_t i = 0; i < n * f; i++)
      x[i] = (float)px[i] / 255.0f;
  else
    for (size_t i = 0; i < n * f; i++)
      x[i] = (float)px[i];
  for (size_t i = 0; i < n; i++)
    y[i] = lb->bytes[i];
  d->file[k].n = n;
  d->file[k].path = im->path;
  /* The bytes are not needed any more: free them before the next split. */
  free(im->bytes);
  free(lb->bytes);
  im->bytes = lb->bytes = NULL;
  return 0;
}

static int create(lk_host *host, const lk_options *o, void **self) {
  data_set *d = NULL;
  int rc = data_new(host, o, &d);
  if (rc != 0)
    return rc;
  d->y_dtype = LK_I32;
  const char *dir = lk_opt_string(o, "dir");
  idx_file files[4] = {{0}};
  for (int i = 0; i < 4 && rc == 0; i++)
    rc = find(host, dir, base_names[i], &files[i].path);
  bool scale = d->normalize == DATA_NORM_SCALE;
  if (rc == 0)
    rc =
        load(d, &files[TRAIN_IMAGES], &files[TRAIN_LABELS], 0, d->limit, scale);
  if (rc == 0)
    rc = load(d, &files[TEST_IMAGES], &files[TEST_LABELS], 1, 0, scale);
  if (rc == 0)
    rc = data_setup(d, scale ? DATA_NORM_NONE : d->normalize);
  if (rc == 0)
    lk_log(host, LK_LOG_INFO,
           "%zu training, %zu validation and %zu test images of %zu pixels "
           "from %s",
           d->n[LK_SPLIT_TRAIN], d->n[LK_SPLIT_VAL], d->n[LK_SPLIT_TEST],
           d->features, dir);
  for (int i = 0; i < 4; i++) {
    free(files[i].path);
    free(files[i].bytes);
  }
  if (rc != 0) {
    data_destroy(d);
    return rc;
  }
  *self = d;
  return 0;
}

static const lk_option options[] = {
    {"dir", LK_OPT_PATH, "/usr/share/datasets/fashion-mnist",
     "directory of train-images-idx3-ubyte, train-labels-idx1-ubyte, "
     "t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, each with or "
     "without .gz",
     NULL},
    DATA_COMMON_OPTIONS("scale", "x / 255"),
    {NULL, 0, NULL, NULL, NULL}};

static const lk_data_ops data_ops = {
    .epoch = data_epoch, .batch = data_batch, .shape = data_shape};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_PLUGIN(
    "idx", "MNIST-layout IDX image files (Fashion-MNIST), gzip or not",
    data_destroy, NULL, .data = &data_ops);

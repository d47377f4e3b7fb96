/* The npy data plugin's readers: the .npy header parser and the .npz
 * directory parser (plugins/data/npy/npy_format.c), and the plugin's whole path
 * from files to batches (npy_open, npy_setup, data_epoch and npy_batch of
 * plugins/data/npy/npy.c).
 *
 * Input: a mode byte; bits 0-1 pick what runs on the rest:
 * - 0: npy_parse_header on the rest, as a whole .npy file;
 * - 1: npz_parse on the rest, as a whole archive;
 * - 2, 3: the plugin, with five option bytes (batch_size - 1, limit,
 *   val_split x 256, test_split x 512, flags: bit 0 shuffle, bit 1
 *   drop_last, bits 2-3 normalize auto/none/scale/standard, bits 4-5
 *   num_classes 0/2/5/300, bit 6 x_shape "2,2"), a u16 length, x's file
 *   of that length and y's file, the rest. An x that starts with "PK" is
 *   an .npz and y is not given. The mode's upper bits are the seed.
 * Each file goes to an in-memory file (memfd) that the plugin maps by its
 * /proc/self/fd path, as it maps a real one. */
#include "../plugins/data/npy/npy.c"
#include "../plugins/data/npy/npy_format.c"
#include "fuzz_util.h"

static fuzz_file files[2];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_file_open(&files[0], "x.npy");
  fuzz_file_open(&files[1], "y.npy");
  return 0;
}

static void header_case(const uint8_t *p, size_t n) {
  npy_header h;
  char why[512] = "";
  int rc = npy_parse_header(p, n, &h, why, sizeof why);
  fuzz_report(rc);
  if (rc != 0) {
    FUZZ_CHECK(rc == -1 && why[0], "refused without a reason");
    FUZZ_CHECK(strstr(why, "header") || strstr(why, "truncated") ||
                   strstr(why, "after the data"),
               "a reason that names no field: \"%s\"", why);
    return;
  }
  FUZZ_CHECK(h.type >= NPY_F4 && h.type <= NPY_I8, "type %d", h.type);
  FUZZ_CHECK(h.itemsize == 1 || h.itemsize == 4 || h.itemsize == 8,
             "itemsize %zu", h.itemsize);
  FUZZ_CHECK(h.ndim <= NPY_MAX_DIMS, "ndim %zu", h.ndim);
  uint64_t numel = 1;
  for (size_t i = 0; i < h.ndim; i++)
    numel *= h.shape[i];
  FUZZ_CHECK(numel == h.numel && h.bytes == numel * h.itemsize,
             "numel %llu, bytes %llu", (unsigned long long)h.numel,
             (unsigned long long)h.bytes);
  FUZZ_CHECK(h.offset <= n && h.offset + h.bytes == n,
             "offset %llu + %llu bytes in a file of %zu",
             (unsigned long long)h.offset, (unsigned long long)h.bytes, n);
}

static void zip_case(const uint8_t *p, size_t n) {
  npz_member *m = NULL;
  size_t count = 0;
  char why[512] = "";
  int rc = npz_parse(p, n, &m, &count, why, sizeof why);
  fuzz_report(rc);
  if (rc != 0) {
    FUZZ_CHECK(!m && why[0], "refused without a reason, or with members");
    return;
  }
  for (size_t i = 0; i < count; i++) {
    FUZZ_CHECK(m[i].method == 0 || m[i].method == 8, "method %d", m[i].method);
    FUZZ_CHECK((const uint8_t *)m[i].name >= p &&
                   (const uint8_t *)m[i].name + m[i].name_len <= p + n,
               "member %zu's name outside the input", i);
    FUZZ_CHECK(m[i].offset <= n && m[i].csize <= n - m[i].offset,
               "member %zu's data outside the input", i);
    FUZZ_CHECK(m[i].method == 8 || m[i].csize == m[i].usize,
               "a stored member of two sizes");
    for (size_t k = 0; k < i; k++)
      FUZZ_CHECK(m[k].name_len != m[i].name_len ||
                     memcmp(m[k].name, m[i].name, m[i].name_len) != 0,
                 "two members of one name");
  }
  free(m);
}

static void plugin_case(fuzz_in *in, uint64_t seed) {
  static const char *const norms[4] = {"auto", "none", "scale", "standard"};
  static const int64_t classes[4] = {0, 2, 5, 300};
  npy_set *s = calloc(1, sizeof *s);
  FUZZ_CHECK(s != NULL, "calloc");
  data_set *d = &s->d;
  d->batch_size = (size_t)fuzz_take(in, 1) + 1;
  d->limit = (size_t)fuzz_take(in, 1);
  d->val_split = (double)fuzz_take(in, 1) / 256.0;
  d->test_split = (double)fuzz_take(in, 1) / 512.0;
  unsigned flags = (unsigned)fuzz_take(in, 1);
  size_t xlen = (size_t)fuzz_take(in, 2), got;
  d->shuffle = flags & 1;
  d->drop_last = flags & 2;
  d->seed = seed;
  s->num_classes = classes[(flags >> 4) & 3];
  s->x_shape = flags & 64 ? "2,2" : "";
  const uint8_t *x = fuzz_bytes(in, xlen, &got);
  fuzz_file_set(&files[0], x, got);
  bool npz = got >= 2 && x[0] == 'P' && x[1] == 'K';
  const uint8_t *y = fuzz_bytes(in, SIZE_MAX, &got);
  fuzz_file_set(&files[1], y, got);
  const char *paths[N_PATHS] = {files[0].path, npz ? "" : files[1].path,
                                "", "", "", ""};
  int rc = npy_open(s, paths);
  if (rc == 0) {
    set_normalize(s, norms[(flags >> 2) & 3]);
    rc = npy_setup(s);
  }
  fuzz_report(rc);
  if (rc != 0) {
    const char *msg = lk_last_error();
    FUZZ_CHECK(rc == LK_EFORMAT || rc == LK_ECONFIG || rc == LK_ENOMEM ||
                   rc == LK_EINVAL,
               "returned %d", rc);
    FUZZ_CHECK(strstr(msg, "/proc/self/fd/") || rc == LK_ECONFIG ||
                   rc == LK_ENOMEM,
               "message names no file: \"%s\"", msg);
    npy_destroy(s);
    return;
  }
  lk_sample_shape sh;
  FUZZ_CHECK(npy_shape(s, &sh) == 0, "shape");
  size_t numel = 1;
  for (size_t i = 0; i < sh.x_ndim; i++)
    numel *= sh.x_shape[i];
  FUZZ_CHECK(sh.x_ndim >= 1 && sh.x_ndim <= LK_MAX_DIMS && numel == d->features,
             "declared %zu dims of %zu values, samples of %zu", sh.x_ndim,
             numel, d->features);
  FUZZ_CHECK(!s->labels || sh.n_classes >= 1, "labels without classes");
  for (int sp = LK_SPLIT_TRAIN; sp <= LK_SPLIT_TEST; sp++)
    for (uint64_t epoch = 0; epoch < 2; epoch++) {
      size_t nb = 0, seen = 0, n = d->n[sp];
      FUZZ_CHECK(data_epoch(s, (lk_split)sp, epoch, &nb) == 0, "epoch");
      for (size_t b = 0; b < nb; b++) {
        lk_batch out;
        memset(&out, 0, sizeof out);
        rc = npy_batch(s, (lk_split)sp, b, &out);
        if (rc != 0) { /* a value that is not finite, named */
          FUZZ_CHECK(rc == LK_EFORMAT, "batch returned %d", rc);
          FUZZ_CHECK(strstr(lk_last_error(), "/proc/self/fd/"),
                     "message names no file: \"%s\"", lk_last_error());
          seen += d->batch_size < n - seen ? d->batch_size : n - seen;
          continue;
        }
        FUZZ_CHECK(out.size >= 1 && out.size <= d->batch_size,
                   "batch of %zu samples", out.size);
        FUZZ_CHECK(out.x.numel == out.size * d->features,
                   "x of %zu values for %zu samples", out.x.numel, out.size);
        FUZZ_CHECK(out.y.numel == out.size * s->y_numel, "y of %zu values",
                   out.y.numel);
        const float *xv = out.x.data;
        for (size_t i = 0; i < out.x.numel; i++)
          FUZZ_CHECK(isfinite(xv[i]), "x[%zu] = %g", i, (double)xv[i]);
        for (size_t i = 0; i < out.y.numel; i++) {
          if (s->labels) {
            int32_t v = ((const int32_t *)out.y.data)[i];
            FUZZ_CHECK(v >= 0 && (size_t)v < sh.n_classes, "label %d of %zu",
                       (int)v, sh.n_classes);
          } else {
            FUZZ_CHECK(isfinite(((const float *)out.y.data)[i]), "target");
          }
        }
        seen += out.size;
      }
      bool dropped = sp == LK_SPLIT_TRAIN && d->drop_last;
      FUZZ_CHECK(dropped ? seen == n - n % d->batch_size : seen == n,
                 "split %d: %zu samples in batches, %zu in the split", sp, seen,
                 n);
    }
  npy_destroy(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in in = {data, size};
  unsigned mode = (unsigned)fuzz_take(&in, 1);
  switch (mode & 3) {
  case 0: header_case(in.p, in.n); break;
  case 1: zip_case(in.p, in.n); break;
  default: plugin_case(&in, mode >> 2); break;
  }
  return 0;
}

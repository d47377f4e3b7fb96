/* npy: numpy arrays as a data set. x and y are .npy files (np.save), or x
 * is an .npz archive (np.savez, np.savez_compressed) holding x_train and
 * y_train (or x and y), and x_val, y_val, x_test, y_test if it has them:
 * keras' mnist.npz layout. The validation and test splits come from
 * files of their own (val_x and val_y, test_x and test_y) or are held out
 * of the training file (val_split, test_split) as csv holds them out.
 *
 * Nothing is read into memory: every file is memory-mapped, and a batch
 * converts the samples it takes (any of float32, float64, uint8, int32,
 * int64, either byte order) to f32, so that a data set larger than memory
 * trains. Only a deflated .npz member (np.savez_compressed) is inflated
 * into memory, once. Labels (y of integers) are checked at create, the
 * values of x as batches read them (a data set larger than memory is not
 * read through at create), unless normalize needs statistics, which take
 * a pass over the training part at create. With tokens = N, x of integers
 * (int32, int64, uint8) holds tokens for an embedding, handed out as i32
 * [T], each checked at create to lie in [0, N).
 *
 * The headers and the zip directory are parsed by npy_format.c, which
 * fuzz/fuzz_npy.c and tests/test_npy.c call directly. */
#include <errno.h>
#include <float.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "bundled.h"
#include "data_common.h"
#include "npy_format.h"

/* The files, by option: the training, validation and test pairs. */
enum { OPT_X, OPT_Y, OPT_VAL_X, OPT_VAL_Y, OPT_TEST_X, OPT_TEST_Y, N_PATHS };
static const char *const path_options[N_PATHS] = {"x",     "y",      "val_x",
                                                  "val_y", "test_x", "test_y"};

#define NPY_REGIONS 8 /* six .npy files, or an .npz and what it inflates */

/* Memory the arrays point into: a mapped file or an inflated member. */
typedef struct npy_region {
  void *p;
  size_t len;
  bool mapped;
} npy_region;

typedef struct npy_array {
  char *file;  /* for messages: PATH, or PATH:MEMBER in an .npz */
  char *label; /* the array's name in messages: x, val_y, x_train ... */
  npy_header h;
  const unsigned char *data; /* h.bytes of it */
  bool swap;                 /* its byte order is not this machine's */
  size_t n;                  /* samples: shape[0] */
  size_t sample;             /* values per sample: the rest of the shape */
} npy_array;

typedef struct npy_pair {
  bool present;
  char *origin; /* "val_x and val_y", "x_val and y_val in PATH" */
  npy_array x, y;
} npy_pair;

typedef struct npy_set {
  data_set d;       /* first: data_epoch and data_destroy take it */
  npy_pair pair[3]; /* training, validation and test files */
  int source[3];    /* per split, the pair its rows index */
  npy_region region[NPY_REGIONS];
  size_t n_regions;
  bool labels;         /* y: class labels (LK_I32), else targets (f32) */
  int64_t num_classes; /* the option; 0: the largest label plus one */
  size_t n_classes;    /* what shape() says */
  size_t y_ndim, y_shape[LK_MAX_DIMS], y_numel;
  int norm;            /* DATA_NORM_*: statistics, for float x */
  bool div255;         /* normalize = scale of uint8 x: x / 255, as idx */
  double *norm_a;      /* [2 * features]: min or mean, then the factor */
  const char *x_shape; /* the option: the declared sample shape */
  int64_t tokens;      /* the option: x holds tokens in [0, tokens); 0: no */
} npy_set;

static void npy_destroy(void *self) {
  npy_set *s = self;
  if (!s)
    return;
  for (int k = 0; k < 3; k++) {
    npy_array *a[2] = {&s->pair[k].x, &s->pair[k].y};
    for (int j = 0; j < 2; j++) {
      free(a[j]->file);
      free(a[j]->label);
    }
    free(s->pair[k].origin);
  }
  for (size_t i = 0; i < s->n_regions; i++) {
    if (s->region[i].mapped)
      munmap(s->region[i].p, s->region[i].len);
    else
      free(s->region[i].p);
  }
  free(s->norm_a);
  data_destroy(&s->d); /* frees s: d is its first member */
}

/* ---- reading values ------------------------------------------------------ */

/* Element I of A, as a double (npy_format.h). */
static double value_at(const npy_array *a, uint64_t i) {
  return npy_value_at(&a->h, a->data, a->swap, i);
}

/* Element I of an integer array. */
static int64_t int_at(const npy_array *a, uint64_t i) {
  const unsigned char *p = a->data + i * a->h.itemsize;
  switch (a->h.type) {
  case NPY_U1: return *p;
  case NPY_I4: return (int32_t)(uint32_t)npy_load_bits(p, 4, a->swap);
  default: return (int64_t)npy_load_bits(p, 8, a->swap);
  }
}

/* "x[5, 2, 1]": the index of element FLAT of A, numpy's way. */
static const char *index_text(const npy_array *a, uint64_t flat, char *buf,
                              size_t len) {
  uint64_t idx[NPY_MAX_DIMS];
  for (size_t i = a->h.ndim; i-- > 0;) {
    uint64_t dim = a->h.shape[i] ? a->h.shape[i] : 1;
    idx[i] = flat % dim;
    flat /= dim;
  }
  int used = snprintf(buf, len, "%s[", a->label);
  for (size_t i = 0; i < a->h.ndim && used > 0 && (size_t)used < len; i++)
    used += snprintf(buf + used, len - (size_t)used, "%s%llu", i ? ", " : "",
                     (unsigned long long)idx[i]);
  if (used > 0 && (size_t)used < len)
    snprintf(buf + used, len - (size_t)used, "]");
  return buf;
}

/* Sample ROW of X as f32 into OUT, checked finite; normalized unless RAW. */
static int read_sample(npy_set *s, const npy_array *x, size_t row, float *out,
                       bool raw) {
  size_t f = x->sample;
  uint64_t first = (uint64_t)row * f;
  if (x->h.type == NPY_F4 && !x->swap)
    memcpy(out, x->data + first * 4, f * sizeof(float));
  else if (x->h.type == NPY_U1)
    for (size_t j = 0; j < f; j++)
      out[j] = (float)x->data[first + j];
  else
    for (size_t j = 0; j < f; j++)
      out[j] = (float)value_at(x, first + j);
  for (size_t j = 0; j < f; j++)
    if (!isfinite(out[j])) {
      char at[160];
      double v = value_at(x, first + j);
      return lk_fail(s->d.host, LK_EFORMAT, "%s: %s = %g is %s", x->file,
                     index_text(x, first + j, at, sizeof at), v,
                     isfinite(v) ? "beyond float32's range" : "not finite");
    }
  if (raw)
    return 0;
  if (s->div255) /* as idx and torchvision's ToTensor: a division */
    for (size_t j = 0; j < f; j++)
      out[j] = out[j] / 255.0f;
  else if (s->norm_a) {
    const double *a = s->norm_a, *b = s->norm_a + f;
    for (size_t j = 0; j < f; j++) {
      float v = (float)((out[j] - a[j]) * b[j]);
      if (!isfinite(v)) {
        char at[160];
        bool std = s->norm == DATA_NORM_STANDARD;
        return lk_fail(s->d.host, LK_EFORMAT,
                       "%s: %s = %g is not finite once normalized (normalize "
                       "= %s) with the training part's %s %g and %s %g",
                       x->file, index_text(x, first + j, at, sizeof at),
                       (double)out[j], std ? "standard" : "scale",
                       std ? "mean" : "min", a[j],
                       std ? "1/std" : "1/(max - min)", b[j]);
      }
      out[j] = v;
    }
  }
  return 0;
}

/* ---- files --------------------------------------------------------------- */

/* Maps PATH (the file of OPTION) whole, read-only, as a new region. */
static int map_file(npy_set *s, const char *option, const char *path,
                    const unsigned char **base, size_t *len) {
  char what[32];
  snprintf(what, sizeof what, "%s file", option);
  int fd;
  int rc = lk_open_input(path, what, &fd);
  if (rc != 0)
    return rc; /* the host's message names the file */
  struct stat st;
  if (fstat(fd, &st) != 0)
    rc =
        lk_fail(s->d.host, LK_EIO, "cannot stat %s: %s", path, strerror(errno));
  else if (st.st_size == 0)
    rc = lk_fail(s->d.host, LK_EFORMAT,
                 "%s: header field 'magic': the file is empty, not a .npy "
                 "file or an .npz archive",
                 path);
  else if ((uint64_t)st.st_size >= SIZE_MAX)
    rc = lk_fail(s->d.host, LK_EINVAL, "%s: too large to map", path);
  else if (s->n_regions == NPY_REGIONS)
    rc = lk_fail(s->d.host, LK_EINVAL, "%s: too many files", path);
  void *p = MAP_FAILED;
  if (rc == 0) {
    p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
      rc = lk_fail(s->d.host, LK_EIO, "cannot map %s: %s", path,
                   strerror(errno));
  }
  close(fd);
  if (rc != 0)
    return rc;
  s->region[s->n_regions++] = (npy_region){p, (size_t)st.st_size, true};
  *base = p;
  *len = (size_t)st.st_size;
  return 0;
}

/* The array at BUF (LEN bytes: a file, or a member of an .npz), named
 * FILE and LABEL in messages. */
static int array_at(npy_set *s, const char *file, const char *label,
                    const unsigned char *buf, size_t len, npy_array *a) {
  if (!(a->file = strdup(file)) || !(a->label = strdup(label)))
    return lk_fail(s->d.host, LK_ENOMEM, "out of memory");
  char why[512];
  if (npy_parse_header(buf, len, &a->h, why, sizeof why) != 0)
    return lk_fail(s->d.host, LK_EFORMAT, "%s: %s", file, why);
  a->data = buf + a->h.offset;
  a->swap = npy_swapped(&a->h);
  return 0;
}

/* Inflates member M (a raw deflate stream at SRC) into a new region. */
static int inflate_member(npy_set *s, const char *name,
                          const unsigned char *src, const npz_member *m,
                          unsigned char **out) {
  lk_host *host = s->d.host;
  /* deflate gives at most 1032 bytes per byte: more is a lie */
  if ((m->usize > 1024 && (m->usize - 1024) / 1032 > m->csize) ||
      m->usize >= SIZE_MAX)
    return lk_fail(host, LK_EFORMAT,
                   "%s: its directory entry says %llu bytes inflated from "
                   "%llu, more than deflate can give",
                   name, (unsigned long long)m->usize,
                   (unsigned long long)m->csize);
  if (s->n_regions == NPY_REGIONS)
    return lk_fail(host, LK_EINVAL, "%s: too many arrays", name);
  unsigned char *buf = malloc(m->usize ? (size_t)m->usize : 1);
  if (!buf)
    return lk_fail(host, LK_ENOMEM, "out of memory inflating %s (%llu bytes)",
                   name, (unsigned long long)m->usize);
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) {
    free(buf);
    return lk_fail(host, LK_ENOMEM, "out of memory inflating %s", name);
  }
  const uInt chunk = 1u << 30;
  uint64_t in_left = m->csize, out_left = m->usize;
  zs.next_in = (Bytef *)(uintptr_t)src;
  zs.next_out = buf;
  int zr, rc = 0;
  for (;;) {
    if (zs.avail_in == 0 && in_left) {
      zs.avail_in = in_left < chunk ? (uInt)in_left : chunk;
      in_left -= zs.avail_in;
    }
    if (zs.avail_out == 0 && out_left) {
      zs.avail_out = out_left < chunk ? (uInt)out_left : chunk;
      out_left -= zs.avail_out;
    }
    zr = inflate(&zs, Z_NO_FLUSH);
    if (zr == Z_OK)
      continue;
    if (zr == Z_STREAM_END && zs.avail_out == 0 && out_left == 0)
      break;
    if (zr == Z_STREAM_END || (zr == Z_BUF_ERROR && zs.avail_in == 0))
      rc = lk_fail(host, LK_EFORMAT,
                   "%s: its deflate stream ends after %llu bytes, its "
                   "directory entry says %llu",
                   name,
                   (unsigned long long)(m->usize - out_left - zs.avail_out),
                   (unsigned long long)m->usize);
    else if (zr == Z_BUF_ERROR)
      rc = lk_fail(host, LK_EFORMAT,
                   "%s: inflates to more than the %llu bytes its directory "
                   "entry says",
                   name, (unsigned long long)m->usize);
    else if (zr == Z_MEM_ERROR)
      rc = lk_fail(host, LK_ENOMEM, "out of memory inflating %s", name);
    else
      rc = lk_fail(host, LK_EFORMAT, "%s: corrupt deflate data: %s", name,
                   zs.msg ? zs.msg : "?");
    break;
  }
  inflateEnd(&zs);
  uLong crc = crc32(0L, Z_NULL, 0);
  for (uint64_t done = 0; rc == 0 && done < m->usize;) {
    uInt n = m->usize - done < chunk ? (uInt)(m->usize - done) : chunk;
    crc = crc32(crc, buf + done, n);
    done += n;
  }
  if (rc == 0 && crc != m->crc)
    rc = lk_fail(host, LK_EFORMAT,
                 "%s: CRC-32 0x%08lx, its directory entry says 0x%08lx: the "
                 "archive is damaged",
                 name, (unsigned long)crc, (unsigned long)m->crc);
  if (rc != 0) {
    free(buf);
    return rc;
  }
  s->region[s->n_regions++] = (npy_region){buf, (size_t)m->usize, false};
  *out = buf;
  return 0;
}

/* The member of the NAMEd array (NAME.npy), or NULL. */
static const npz_member *find_member(const npz_member *m, size_t n,
                                     const char *name) {
  size_t len = strlen(name);
  for (size_t i = 0; i < n; i++)
    if (m[i].name_len == len + 4 && memcmp(m[i].name, name, len) == 0 &&
        memcmp(m[i].name + len, ".npy", 4) == 0)
      return &m[i];
  return NULL;
}

/* "a, b and c": the arrays of an archive, for messages. */
static void list_members(const npz_member *m, size_t n, char *buf, size_t len) {
  int used = snprintf(buf, len, "%s", n ? "" : "nothing");
  for (size_t i = 0; i < n && used >= 0 && (size_t)used < len; i++) {
    size_t l = m[i].name_len;
    if (l >= 4 && memcmp(m[i].name + l - 4, ".npy", 4) == 0)
      l -= 4;
    used += snprintf(buf + used, len - (size_t)used, "%s%.*s",
                     i == 0       ? ""
                     : i + 1 == n ? " and "
                                  : ", ",
                     (int)(l > 64 ? 64 : l), m[i].name);
  }
}

/* The array NAME of the archive PATH (BASE, LEN) into A. */
static int member_array(npy_set *s, const char *path, const unsigned char *base,
                        const npz_member *m, const char *name, npy_array *a) {
  size_t len = strlen(path) + strlen(name) + 2;
  char *file = malloc(len);
  if (!file)
    return lk_fail(s->d.host, LK_ENOMEM, "out of memory");
  snprintf(file, len, "%s:%s", path, name);
  const unsigned char *at = base + m->offset;
  int rc = 0;
  if (m->method == 8) {
    unsigned char *buf = NULL;
    rc = inflate_member(s, file, at, m, &buf);
    at = buf;
  }
  if (rc == 0)
    rc = array_at(s, file, name, at, (size_t)m->usize, a);
  free(file);
  return rc;
}

/* The pairs of the .npz archive PATH, by name. */
static int load_npz(npy_set *s, const char *path, const unsigned char *base,
                    size_t len) {
  static const char *const names[3][2][2] = {
      {{"x_train", "y_train"}, {"x", "y"}},
      {{"x_val", "y_val"}, {NULL, NULL}},
      {{"x_test", "y_test"}, {NULL, NULL}}};
  lk_host *host = s->d.host;
  npz_member *m = NULL;
  size_t n = 0;
  char why[512];
  int prc = npz_parse(base, len, &m, &n, why, sizeof why);
  if (prc == -2)
    return lk_fail(host, LK_ENOMEM, "out of memory reading %s", path);
  if (prc != 0)
    return lk_fail(host, LK_EFORMAT, "%s: %s", path, why);
  char list[600];
  list_members(m, n, list, sizeof list);
  int rc = 0;
  for (int k = 0; rc == 0 && k < 3; k++) {
    for (int alt = 0; rc == 0 && alt < 2 && names[k][alt][0]; alt++) {
      const char *xn = names[k][alt][0], *yn = names[k][alt][1];
      const npz_member *xm = find_member(m, n, xn), *ym = find_member(m, n, yn);
      if (!xm && !ym)
        continue;
      if (!xm || !ym) {
        rc = lk_fail(host, LK_EFORMAT, "%s holds %s but not %s (it holds %s)",
                     path, xm ? xn : yn, xm ? yn : xn, list);
        break;
      }
      npy_pair *p = &s->pair[k];
      size_t olen = strlen(path) + 32;
      if (!(p->origin = malloc(olen)))
        rc = lk_fail(host, LK_ENOMEM, "out of memory");
      else
        snprintf(p->origin, olen, "%s and %s in %s", xn, yn, path);
      if (rc == 0)
        rc = member_array(s, path, base, xm, xn, &p->x);
      if (rc == 0)
        rc = member_array(s, path, base, ym, yn, &p->y);
      p->present = rc == 0;
      break;
    }
    if (rc == 0 && k == 0 && !s->pair[0].present)
      rc = lk_fail(host, LK_EFORMAT,
                   "%s: no training arrays: an .npz x needs x_train and "
                   "y_train (or x and y); it holds %s",
                   path, list);
  }
  free(m);
  return rc;
}

/* Samples and values per sample of A, which must hold at least one of
 * each. */
static int count_samples(npy_set *s, npy_array *a) {
  char sh[200];
  npy_shape_text(&a->h, sh, sizeof sh);
  if (a->h.ndim == 0)
    return lk_fail(s->d.host, LK_EFORMAT,
                   "%s: header field 'shape': () is one value; %s needs (N, "
                   "...), a sample per %s[i]",
                   a->file, a->label, a->label);
  if (a->h.shape[0] == 0 || a->h.numel == 0)
    return lk_fail(s->d.host, LK_EFORMAT,
                   "%s: header field 'shape': %s holds no %s", a->file, sh,
                   a->h.shape[0] ? "values" : "samples");
  a->n = (size_t)a->h.shape[0];
  a->sample = (size_t)(a->h.numel / a->h.shape[0]);
  return 0;
}

/* The sample shape of FIRST's dimensions 1.. (for messages). */
static const char *sample_text(const npy_array *a, char *buf, size_t len) {
  npy_header h = a->h;
  h.ndim = a->h.ndim - 1;
  memmove(h.shape, a->h.shape + 1, h.ndim * sizeof h.shape[0]);
  return npy_shape_text(&h, buf, len);
}

static bool same_sample(const npy_array *a, const npy_array *b) {
  return a->h.ndim == b->h.ndim &&
         memcmp(a->h.shape + 1, b->h.shape + 1,
                (a->h.ndim - 1) * sizeof a->h.shape[0]) == 0;
}

static bool is_labels(const npy_array *y) {
  return y->h.type == NPY_U1 || y->h.type == NPY_I4 || y->h.type == NPY_I8;
}

/* Pair K against itself (x and y of as many samples, y's shape) and
 * against the training pair. */
static int check_pair(npy_set *s, int k) {
  lk_host *host = s->d.host;
  npy_pair *p = &s->pair[k];
  npy_array *x = &p->x, *y = &p->y;
  int rc = count_samples(s, x);
  if (rc == 0)
    rc = count_samples(s, y);
  if (rc != 0)
    return rc;
  char a[200], b[200];
  bool labels = is_labels(y);
  if (labels && !(y->h.ndim == 1 || (y->h.ndim == 2 && y->h.shape[1] == 1)))
    return lk_fail(host, LK_EFORMAT,
                   "%s: header field 'shape': %s: class labels ('%s') are "
                   "one per sample, (N,) or (N, 1); float targets may have "
                   "more",
                   y->file, npy_shape_text(&y->h, a, sizeof a), y->h.descr);
  if (!labels && y->h.ndim - 1 > LK_MAX_DIMS)
    return lk_fail(host, LK_EFORMAT,
                   "%s: header field 'shape': %s: targets of more than %d "
                   "dimensions",
                   y->file, npy_shape_text(&y->h, a, sizeof a), LK_MAX_DIMS);
  if (x->n != y->n)
    return lk_fail(host, LK_EFORMAT,
                   "%s has %zu samples (header field 'shape' %s) but %s has "
                   "%zu (%s)",
                   x->file, x->n, npy_shape_text(&x->h, a, sizeof a), y->file,
                   y->n, npy_shape_text(&y->h, b, sizeof b));
  if (k == 0)
    return 0;
  const npy_pair *t = &s->pair[0];
  if (!same_sample(x, &t->x))
    return lk_fail(host, LK_EFORMAT,
                   "%s: header field 'shape': samples of %s, the training "
                   "x's are %s",
                   x->file, sample_text(x, a, sizeof a),
                   sample_text(&t->x, b, sizeof b));
  if (labels != is_labels(&t->y))
    return lk_fail(host, LK_EFORMAT,
                   "%s: header field 'descr': '%s' makes %s, the training "
                   "y's '%s' %s",
                   y->file, y->h.descr, labels ? "class labels" : "targets",
                   t->y.h.descr, labels ? "targets" : "class labels");
  if (!labels && !same_sample(y, &t->y))
    return lk_fail(host, LK_EFORMAT,
                   "%s: header field 'shape': targets of %s, the training "
                   "y's are %s",
                   y->file, sample_text(y, a, sizeof a),
                   sample_text(&t->y, b, sizeof b));
  return 0;
}

/* Maps the files that PATHS name (indexed by OPT_*; "" for none) and
 * checks them: x and y, or x an .npz archive; the validation and test
 * pairs, both files or neither. */
static int npy_open(npy_set *s, const char *const paths[N_PATHS]) {
  lk_host *host = s->d.host;
  const unsigned char *base = NULL;
  size_t len = 0;
  int rc = map_file(s, "x", paths[OPT_X], &base, &len);
  if (rc != 0)
    return rc;
  bool npz = len >= 4 && memcmp(base, "PK", 2) == 0;
  if (!npz && (len < 6 || memcmp(base, "\x93NUMPY", 6) != 0))
    return lk_fail(host, LK_EFORMAT,
                   "%s: header field 'magic': neither a .npy file (it would "
                   "start with \\x93NUMPY) nor an .npz archive (a zip file)",
                   paths[OPT_X]);
  if (npz) {
    for (int i = OPT_Y; i < N_PATHS; i++)
      if (*paths[i])
        return lk_fail(host, LK_ECONFIG,
                       "%s = %s with an .npz x: the archive's arrays are "
                       "taken by name (x_train, y_train, x_val, y_val, "
                       "x_test, y_test)",
                       path_options[i], paths[i]);
    rc = load_npz(s, paths[OPT_X], base, len);
  } else {
    if (!*paths[OPT_Y])
      return lk_fail(host, LK_ECONFIG,
                     "y is empty: name the .npy file of the training "
                     "targets (or make x an .npz archive of x_train and "
                     "y_train)");
    for (int k = 0; rc == 0 && k < 3; k++) {
      const char *px = paths[2 * k], *py = paths[2 * k + 1];
      if (!*px && !*py)
        continue;
      if (!*px || !*py)
        return lk_fail(host, LK_ECONFIG,
                       "%s = %s without %s: name both files or neither",
                       path_options[*px ? 2 * k : 2 * k + 1], *px ? px : py,
                       path_options[*px ? 2 * k + 1 : 2 * k]);
      npy_pair *p = &s->pair[k];
      size_t olen = 32;
      if (!(p->origin = malloc(olen)))
        return lk_fail(host, LK_ENOMEM, "out of memory");
      snprintf(p->origin, olen, "%s and %s", path_options[2 * k],
               path_options[2 * k + 1]);
      for (int j = 0; rc == 0 && j < 2; j++) {
        const char *path = paths[2 * k + j];
        if (k + j > 0 &&
            (rc = map_file(s, path_options[2 * k + j], path, &base, &len)) != 0)
          break;
        if (len >= 4 && memcmp(base, "PK", 2) == 0)
          rc = lk_fail(host, LK_ECONFIG,
                       "%s = %s is an .npz archive: only x may name one (its "
                       "arrays are taken by name)",
                       path_options[2 * k + j], path);
        else
          rc = array_at(s, path, path_options[2 * k + j], base, len,
                        j ? &p->y : &p->x);
      }
      p->present = rc == 0;
    }
  }
  for (int k = 0; rc == 0 && k < 3; k++)
    if (s->pair[k].present)
      rc = check_pair(s, k);
  return rc;
}

/* ---- the set ------------------------------------------------------------- */

/* x_shape = "1,28,28", or the stored sample shape. */
static int declare_shape(npy_set *s) {
  data_set *d = &s->d;
  const npy_array *x = &s->pair[0].x;
  d->features = x->sample;
  char a[200];
  if (!s->x_shape || !*s->x_shape) {
    if (x->h.ndim - 1 > LK_MAX_DIMS)
      return lk_fail(d->host, LK_EFORMAT,
                     "%s: header field 'shape': %s gives samples of %zu "
                     "dimensions, more than %d: declare them with x_shape",
                     x->file, npy_shape_text(&x->h, a, sizeof a), x->h.ndim - 1,
                     LK_MAX_DIMS);
    d->x_ndim = x->h.ndim > 1 ? x->h.ndim - 1 : 1;
    for (size_t i = 0; i < d->x_ndim; i++)
      d->x_shape[i] = x->h.ndim > 1 ? (size_t)x->h.shape[i + 1] : 1;
    return 0;
  }
  const char *p = s->x_shape;
  size_t numel = 1; /* SIZE_MAX once the product does not fit */
  d->x_ndim = 0;
  for (;;) {
    while (*p == ' ')
      p++;
    char *end = NULL;
    errno = 0;
    unsigned long long v = *p >= '0' && *p <= '9' ? strtoull(p, &end, 10) : 0;
    if (v == 0 || errno || v > (1ull << 32) || d->x_ndim == LK_MAX_DIMS)
      return lk_fail(d->host, LK_ECONFIG,
                     "x_shape = \"%s\": expected 1 to %d whole numbers >= 1, "
                     "comma separated (1,28,28)",
                     s->x_shape, LK_MAX_DIMS);
    d->x_shape[d->x_ndim++] = (size_t)v;
    if (!lk_size_mul(numel, (size_t)v, &numel))
      numel = SIZE_MAX;
    for (p = end; *p == ' '; p++)
      ;
    if (*p == '\0')
      break;
    if (*p++ != ',')
      return lk_fail(d->host, LK_ECONFIG,
                     "x_shape = \"%s\": expected 1 to %d whole numbers >= 1, "
                     "comma separated (1,28,28)",
                     s->x_shape, LK_MAX_DIMS);
  }
  if (numel != x->sample)
    return lk_fail(d->host, LK_ECONFIG,
                   "x_shape = %s holds %s%zu values, but the samples of %s "
                   "hold %zu (header field 'shape' %s)",
                   s->x_shape, numel == SIZE_MAX ? "more than " : "", numel,
                   x->file, x->sample, npy_shape_text(&x->h, a, sizeof a));
  return 0;
}

/* The labels of the first COUNT samples of pair K: whole numbers in
 * [0, num_classes), or from 0 when num_classes is 0; *MAX gets the
 * largest. */
static int check_labels(npy_set *s, int k, size_t count, int64_t *max) {
  const npy_array *y = &s->pair[k].y;
  char at[160];
  for (size_t i = 0; i < count; i++) {
    int64_t v = int_at(y, i);
    if (v < 0 || v > INT32_MAX)
      return lk_fail(s->d.host, LK_EFORMAT,
                     "%s: %s = %lld: class labels are whole numbers from 0 "
                     "(to 2^31 - 1)",
                     y->file, index_text(y, i, at, sizeof at), (long long)v);
    if (s->num_classes && v >= s->num_classes)
      return lk_fail(s->d.host, LK_EFORMAT,
                     "%s: %s = %lld, but num_classes = %lld: labels are in "
                     "[0, %lld)",
                     y->file, index_text(y, i, at, sizeof at), (long long)v,
                     (long long)s->num_classes, (long long)s->num_classes);
    *max = v > *max ? v : *max;
  }
  return 0;
}

/* The targets of the first COUNT samples of pair K: finite in f32. */
static int check_targets(npy_set *s, int k, size_t count) {
  const npy_array *y = &s->pair[k].y;
  uint64_t n = (uint64_t)count * y->sample;
  for (uint64_t i = 0; i < n; i++) {
    double v = value_at(y, i);
    if (!isfinite((float)v)) {
      char at[160];
      return lk_fail(s->d.host, LK_EFORMAT, "%s: %s = %g is %s", y->file,
                     index_text(y, i, at, sizeof at), v,
                     isfinite(v) ? "beyond float32's range" : "not finite");
    }
  }
  return 0;
}

/* Per-feature statistics of the training rows, in double, as
 * data_normalize takes them (the same values, in the same order, give the
 * same bits as csv). */
static int npy_stats(npy_set *s) {
  data_set *d = &s->d;
  size_t f = d->features, n = d->n[LK_SPLIT_TRAIN];
  const size_t *rows = d->rows[LK_SPLIT_TRAIN];
  const npy_array *x = &s->pair[0].x;
  double *a = calloc(2 * f, sizeof *a), *b = a + f;
  float *row = malloc(f * sizeof *row);
  int rc = a && row ? 0 : lk_fail(d->host, LK_ENOMEM, "out of memory");
  if (rc == 0 && s->norm == DATA_NORM_STANDARD) { /* a mean, b 1 / std */
    for (size_t i = 0; rc == 0 && i < n; i++)
      if ((rc = read_sample(s, x, rows[i], row, true)) == 0)
        for (size_t j = 0; j < f; j++)
          a[j] += row[j];
    for (size_t j = 0; j < f; j++)
      a[j] /= (double)n;
    for (size_t i = 0; rc == 0 && i < n; i++)
      if ((rc = read_sample(s, x, rows[i], row, true)) == 0)
        for (size_t j = 0; j < f; j++) {
          double e = row[j] - a[j];
          b[j] += e * e;
        }
    for (size_t j = 0; j < f; j++) {
      double sd = sqrt(b[j] / (double)n); /* population std, as sklearn */
      b[j] = sd > 0 ? 1.0 / sd : 1.0;     /* constant feature: only centred */
    }
  } else if (rc == 0) { /* min-max: a min, b 1 / (max - min) */
    for (size_t i = 0; rc == 0 && i < n; i++)
      if ((rc = read_sample(s, x, rows[i], row, true)) == 0)
        for (size_t j = 0; j < f; j++) {
          double v = row[j];
          if (i == 0)
            a[j] = b[j] = v;
          a[j] = v < a[j] ? v : a[j];
          b[j] = v > b[j] ? v : b[j];
        }
    for (size_t j = 0; j < f; j++)
      b[j] = b[j] > a[j] ? 1.0 / (b[j] - a[j]) : 1.0;
  }
  free(row);
  if (rc != 0) {
    free(a);
    return rc;
  }
  s->norm_a = a;
  return 0;
}

/* Tokens = N: x of integers, one dimension per sample, never normalized;
 * the tokens of the first COUNT samples of pair K in [0, N). */
static int check_tokens(npy_set *s, int k, size_t count) {
  const npy_array *x = &s->pair[k].x;
  char at[160];
  if (k == 0 && x->h.type != NPY_U1 && x->h.type != NPY_I4 &&
      x->h.type != NPY_I8)
    return lk_fail(s->d.host, LK_ECONFIG,
                   "tokens = %lld, but %s holds %s: tokens are integers "
                   "(int32, int64 or uint8)",
                   (long long)s->tokens, x->file,
                   x->h.type == NPY_F4 ? "float32" : "float64");
  if (k == 0 && s->d.x_ndim != 1)
    return lk_fail(s->d.host, LK_ECONFIG,
                   "tokens = %lld, but %s's samples have %zu dimensions: a "
                   "sample of tokens is one sequence, [T]",
                   (long long)s->tokens, x->file, s->d.x_ndim);
  if (k == 0 && s->norm != DATA_NORM_NONE)
    return lk_fail(s->d.host, LK_ECONFIG,
                   "tokens = %lld: tokens are not normalized (normalize = "
                   "none or auto)",
                   (long long)s->tokens);
  uint64_t n = (uint64_t)count * x->sample;
  for (uint64_t i = 0; i < n; i++) {
    int64_t v = int_at(x, i);
    if (v < 0 || v >= s->tokens)
      return lk_fail(s->d.host, LK_EFORMAT,
                     "%s: %s = %lld, but tokens = %lld: tokens are in "
                     "[0, %lld) (the embedding's num_embeddings)",
                     x->file, index_text(x, i, at, sizeof at), (long long)v,
                     (long long)s->tokens, (long long)s->tokens);
  }
  return 0;
}

/* The splits, as data_setup makes them (the same rows for the same
 * options and seed), but for the validation and test files; then the
 * labels or targets in use are checked and the statistics taken. */
static int npy_setup(npy_set *s) {
  data_set *d = &s->d;
  lk_host *host = d->host;
  const npy_pair *vp = &s->pair[1], *tp = &s->pair[2];
  int rc = declare_shape(s);
  if (rc != 0)
    return rc;
  if (vp->present && d->val_split > 0)
    return lk_fail(host, LK_ECONFIG,
                   "val_split = %g and a validation pair (%s): the "
                   "validation split comes from one or the other",
                   d->val_split, vp->origin);
  if (tp->present && d->test_split > 0)
    return lk_fail(host, LK_ECONFIG,
                   "test_split = %g and a test pair (%s): the test split "
                   "comes from one or the other",
                   d->test_split, tp->origin);
  size_t n = s->pair[0].x.n;
  if (d->limit && d->limit < n)
    n = d->limit;
  size_t n_val = vp->present ? 0 : data_part(d->val_split, n);
  size_t n_test = tp->present ? 0 : data_part(d->test_split, n);
  s->source[LK_SPLIT_TRAIN] = 0;
  s->source[LK_SPLIT_VAL] = vp->present ? 1 : 0;
  s->source[LK_SPLIT_TEST] = tp->present ? 2 : 0;
  rc = data_splits(d, n, n_val, n_test, vp->present ? vp->x.n : 0,
                   tp->present ? tp->x.n : 0);
  if (rc != 0)
    return rc;

  for (int k = 0; rc == 0 && s->tokens && k < 3; k++)
    if (s->pair[k].present)
      rc = check_tokens(s, k, k ? s->pair[k].x.n : n);
  if (rc != 0)
    return rc;

  /* Labels or targets: of the training rows in use and of the other
   * files, before anything trains. */
  const npy_array *y = &s->pair[0].y;
  s->labels = is_labels(y);
  if (s->labels) {
    int64_t max = -1;
    for (int k = 0; rc == 0 && k < 3; k++)
      if (s->pair[k].present)
        rc = check_labels(s, k, k ? s->pair[k].x.n : n, &max);
    s->n_classes = s->num_classes ? (size_t)s->num_classes : (size_t)max + 1;
  } else {
    for (int k = 0; rc == 0 && k < 3; k++)
      if (s->pair[k].present)
        rc = check_targets(s, k, k ? s->pair[k].x.n : n);
    s->y_ndim = y->h.ndim - 1;
    for (size_t i = 0; i < s->y_ndim; i++)
      s->y_shape[i] = (size_t)y->h.shape[i + 1];
  }
  if (rc != 0)
    return rc;
  s->y_numel = s->labels ? 1 : y->sample;
  d->y_dtype = s->labels ? LK_I32 : LK_F32;

  bool from_file[3] = {false, vp->present, tp->present};
  if ((rc = data_rows(d, n, n_val, n_test, from_file, s->y_numel)) != 0)
    return rc;
  return s->norm == DATA_NORM_NONE ? 0 : npy_stats(s);
}

/* normalize = NORM (auto, none, scale, standard) for the training x
 * npy_open found: scale divides uint8 by 255, as idx does, and takes the
 * minimum and maximum of other types. */
static void set_normalize(npy_set *s, const char *norm) {
  bool u8 = s->pair[0].x.h.type == NPY_U1 && !s->tokens; /* auto: none */
  bool scale = strcmp(norm, "scale") == 0 || (strcmp(norm, "auto") == 0 && u8);
  s->div255 = scale && u8;
  s->norm = strcmp(norm, "standard") == 0 ? DATA_NORM_STANDARD
            : scale && !u8                ? DATA_NORM_SCALE
                                          : DATA_NORM_NONE;
  s->d.normalize = s->div255 ? DATA_NORM_SCALE : s->norm;
}

/* ---- entries ------------------------------------------------------------- */

static int npy_batch(void *self, lk_split split, size_t index, lk_batch *out) {
  npy_set *s = self;
  data_set *d = &s->d;
  const size_t *rows;
  size_t size, f = d->features;
  int rc = data_batch_rows(d, split, index, &rows, &size);
  if (rc != 0)
    return rc;
  const npy_pair *src = &s->pair[s->source[split]];
  int32_t *tok = (int32_t *)(void *)d->bx; /* as many 4-byte values */
  for (size_t i = 0; s->tokens && i < size; i++)
    for (size_t j = 0; j < f; j++) /* checked at create */
      tok[i * f + j] = (int32_t)int_at(&src->x, (uint64_t)rows[i] * f + j);
  for (size_t i = 0; rc == 0 && !s->tokens && i < size; i++)
    rc = read_sample(s, &src->x, rows[i], d->bx + i * f, false);
  if (rc != 0)
    return rc;
  const npy_array *y = &src->y;
  size_t w = s->y_numel;
  if (s->labels)
    for (size_t i = 0; i < size; i++) /* checked at create */
      ((int32_t *)d->by)[i] = (int32_t)int_at(y, rows[i]);
  else
    for (size_t i = 0; i < size; i++)
      for (size_t j = 0; j < w; j++)
        ((float *)d->by)[i * w + j] =
            (float)value_at(y, (uint64_t)rows[i] * w + j);
  *out = data_batch_of(
      split, d->epoch[split], index,
      data_tensor("x", s->tokens ? LK_I32 : LK_F32, size, 1, &f, d->bx),
      data_tensor("y", d->y_dtype, size, s->y_ndim, s->y_shape, d->by));
  return 0;
}

static int npy_shape(void *self, lk_sample_shape *out) {
  const npy_set *s = self;
  const data_set *d = &s->d;
  *out = (lk_sample_shape){.x_dtype = s->tokens ? LK_I32 : LK_F32,
                           .x_ndim = d->x_ndim,
                           .y_dtype = d->y_dtype,
                           .y_ndim = s->y_ndim,
                           .n_classes = s->labels ? s->n_classes : 0};
  for (size_t i = 0; i < d->x_ndim; i++)
    out->x_shape[i] = d->x_shape[i];
  for (size_t i = 0; i < s->y_ndim; i++)
    out->y_shape[i] = s->y_shape[i];
  return 0;
}

static int create(lk_host *host, const lk_options *o, void **self) {
  npy_set *s = calloc(1, sizeof *s);
  if (!s)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  data_set *d = &s->d;
  const char *norm = lk_opt_string(o, "normalize");
  d->host = host;
  d->batch_size = (size_t)lk_opt_int(o, "batch_size");
  d->limit = (size_t)lk_opt_int(o, "limit");
  d->val_split = lk_opt_double(o, "val_split");
  d->test_split = lk_opt_double(o, "test_split");
  d->shuffle = lk_opt_bool(o, "shuffle");
  d->drop_last = lk_opt_bool(o, "drop_last");
  d->seed = lk_host_seed(host);
  s->num_classes = lk_opt_int(o, "num_classes");
  s->x_shape = lk_opt_string(o, "x_shape");
  s->tokens = lk_opt_int(o, "tokens");
  const char *paths[N_PATHS];
  for (int i = 0; i < N_PATHS; i++)
    paths[i] = lk_opt_string(o, path_options[i]);
  int rc = npy_open(s, paths);
  if (rc == 0) {
    set_normalize(s, norm);
    rc = npy_setup(s);
  }
  if (rc != 0) {
    npy_destroy(s);
    return rc;
  }
  char shape[96] = "";
  for (size_t i = 0, used = 0; i < d->x_ndim && used < sizeof shape; i++)
    used += (size_t)snprintf(shape + used, sizeof shape - used, "%s%zu",
                             i ? "x" : "", d->x_shape[i]);
  char classes[48] = "";
  if (s->labels)
    snprintf(classes, sizeof classes, ", %zu classes", s->n_classes);
  lk_log(host, LK_LOG_INFO,
         "%zu training, %zu validation and %zu test samples of %s%s from %s "
         "(memory-mapped)",
         d->n[LK_SPLIT_TRAIN], d->n[LK_SPLIT_VAL], d->n[LK_SPLIT_TEST], shape,
         classes, paths[OPT_X]);
  for (size_t i = 0; i < s->n_regions; i++)
    if (!s->region[i].mapped)
      lk_log(host, LK_LOG_INFO,
             "%s holds deflated arrays (np.savez_compressed): %zu bytes "
             "inflated into memory; np.savez keeps them memory-mapped",
             paths[OPT_X], s->region[i].len);
  *self = s;
  return 0;
}

static const lk_option options[] = {
    {"x", LK_OPT_PATH, NULL,
     "the training inputs: a .npy file of shape (N, ...), sample i being "
     "x[i] (float32, float64, uint8, int32 or int64, either byte order, C "
     "order), memory-mapped; or an .npz archive holding x_train and y_train "
     "(or x and y), and x_val and y_val, x_test and y_test if it has them "
     "(keras' mnist.npz layout; np.savez keeps it mapped, "
     "np.savez_compressed is inflated into memory)",
     NULL},
    {"y", LK_OPT_PATH, "",
     "the training targets, a .npy file: integers (uint8, int32, int64) "
     "of shape (N,) or (N, 1) are class labels (y i32, in [0, "
     "num_classes)); floats (float32, float64) of shape (N, ...) are "
     "regression targets (y f32). Empty when x is an .npz",
     NULL},
    {"val_x", LK_OPT_PATH, "",
     "the validation inputs, a .npy file (with val_y; not with val_split)",
     NULL},
    {"val_y", LK_OPT_PATH, "", "the validation targets (with val_x)", NULL},
    {"test_x", LK_OPT_PATH, "",
     "the test inputs, a .npy file (with test_y; not with test_split)", NULL},
    {"test_y", LK_OPT_PATH, "", "the test targets (with test_x)", NULL},
    {"test_split", LK_OPT_DOUBLE, "0",
     "fraction of the training file's samples held out as the test split, "
     "the same ones every run (drawn from [loop] seed; apart from "
     "val_split's); 0: test_x and test_y, if any",
     "[0, 1)"},
    {"x_shape", LK_OPT_STRING, "",
     "one sample's shape as the model is told it, a comma list with as many "
     "values as a sample holds (1,28,28 for x of shape (N, 28, 28), to a "
     "conv2d); empty: x's shape after N",
     NULL},
    {"tokens", LK_OPT_INT, "0",
     "N > 0: x of integers (int32, int64, uint8; one dimension per sample) "
     "holds tokens in [0, N), each checked at create, given to the model "
     "as i32 [T] for a net that starts with embedding(N, ...); 0: x's "
     "values are features, f32",
     "[0, 2147483647]"},
    {"num_classes", LK_OPT_INT, "0",
     "class labels must lie in [0, num_classes), and the model is told "
     "num_classes; 0: the largest label in the files plus one",
     "[0, 2147483647]"},
    {"batch_size", LK_OPT_INT, "64", "samples per batch", "[1, inf)"},
    {"shuffle", LK_OPT_BOOL, "true",
     "shuffle the training split, a new order each epoch drawn from [loop] "
     "seed",
     NULL},
    {"drop_last", LK_OPT_BOOL, "false",
     "drop the training split's last batch when it is short", NULL},
    {"normalize", LK_OPT_ENUM, "auto",
     "auto: scale for uint8 x, none otherwise; none; scale: x / 255 for "
     "uint8 x (as idx), (x - min) / (max - min) per feature otherwise; "
     "standard: (x - mean) / std per feature; statistics from the training "
     "part only (after val_split), applied to every split, in a pass over "
     "it at create",
     "auto|none|scale|standard"},
    {"val_split", LK_OPT_DOUBLE, "0",
     "fraction of the training samples held out for validation, the same "
     "ones every epoch (drawn from [loop] seed); 0: val_x and val_y, if any",
     "[0, 1)"},
    {"limit", LK_OPT_INT, "0",
     "use only the first N samples of the training file (0: all)", "[0, inf)"},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_data_ops data_ops = {
    .epoch = data_epoch, .batch = npy_batch, .shape = npy_shape};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_PLUGIN(
    "npy", "numpy arrays: .npy files or an .npz archive, memory-mapped",
    npy_destroy, NULL, .data = &data_ops);

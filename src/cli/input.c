/* loopkit predict --input FILE: new samples, without labels, for a
 * trained model's input (lk_model, loopkit/infer.h):
 *
 * - a .npy file, read with the npy data plugin's own reader
 *   (plugins/data/npy/npy_format.c: every dtype it reads, either byte
 *   order): [N, sample...], the sample's shape the model's once the
 *   dimensions of 1 are left out ((N, 28, 28) for a net of [1, 28, 28]);
 * - otherwise a CSV file of numbers, one sample a line, as many values as
 *   the model's sample holds and no label column; a first line that is not
 *   all numbers is a header.
 *
 * The values are the model's inputs as they are: the data plugin's
 * normalization (idx's x / 255) is not applied. Every problem is the
 * file's, and named with it: EXIT_USAGE. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "npy_format.h"

/* What the samples must look like: the model's input. */
typedef struct want {
  lk_dtype dtype;
  size_t ndim, dims[LK_MAX_DIMS], numel;
  char text[LK_MAX_DIMS * 22 + 16]; /* "f32 [1, 28, 28]" */
} want;

static void want_of(const lk_model *m, want *w) {
  lk_model_input_shape(m, &w->dtype, &w->ndim, w->dims);
  w->numel = 1;
  size_t o = (size_t)snprintf(w->text, sizeof w->text, "%s [",
                              w->dtype == LK_I32 ? "i32" : "f32");
  for (size_t i = 0; i < w->ndim; i++) {
    w->numel *= w->dims[i];
    o += (size_t)snprintf(w->text + o, sizeof w->text - o, "%s%zu",
                          i ? ", " : "", w->dims[i]);
  }
  snprintf(w->text + o, sizeof w->text - o, "]");
}

/* Value V into element I of OUT as the model's dtype: a feature must be
 * finite, a token a whole number that fits an i32. */
static int put(const want *w, void *out, size_t i, double v) {
  if (w->dtype == LK_I32) {
    if (v != floor(v) || v < INT32_MIN || v > INT32_MAX)
      return -1;
    ((int32_t *)out)[i] = (int32_t)v;
    return 0;
  }
  if (!isfinite(v) || fabs(v) > FLT_MAX)
    return -1;
  ((float *)out)[i] = (float)v;
  return 0;
}

/* The whole of PATH, in *BUF (free it), *LEN bytes. */
static int slurp(const char *path, unsigned char **buf, size_t *len) {
  FILE *f = fopen(path, "rb");
  struct stat st;
  if (!f || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    cli_error("predict: --input %s: %s", path,
              f ? "not a regular file" : strerror(errno));
    if (f)
      fclose(f);
    return -1;
  }
  *len = (size_t)st.st_size;
  *buf = malloc(*len ? *len : 1);
  bool ok = *buf && fread(*buf, 1, *len, f) == *len;
  fclose(f);
  if (!ok) {
    cli_error("predict: --input %s: %s", path,
              *buf ? "cannot read it" : "out of memory");
    free(*buf);
    *buf = NULL;
    return -1;
  }
  return 0;
}

/* Whether the dimensions other than 1 of A and B are the same. */
static bool same_squeezed(const uint64_t *a, size_t na, const size_t *b,
                          size_t nb) {
  size_t i = 0, j = 0;
  for (;;) {
    while (i < na && a[i] == 1)
      i++;
    while (j < nb && b[j] == 1)
      j++;
    if (i == na || j == nb)
      return i == na && j == nb;
    if (a[i++] != b[j++])
      return false;
  }
}

static int read_npy(const char *path, const want *w, void **out, size_t *n) {
  unsigned char *buf;
  size_t len;
  if (slurp(path, &buf, &len) != 0)
    return -1;
  npy_header h;
  char why[512], shape[160];
  int rc = npy_parse_header(buf, len, &h, why, sizeof why);
  if (rc != 0)
    cli_error("predict: --input %s: %s", path, why);
  else if (!same_squeezed(h.shape + 1, h.ndim - 1, w->dims, w->ndim)) {
    npy_header sample = h; /* the shape after the first dimension */
    sample.ndim = h.ndim - 1;
    memmove(sample.shape, h.shape + 1, sample.ndim * sizeof *sample.shape);
    char one[160];
    cli_error("predict: --input %s holds an array of shape %s: samples of "
              "shape %s, but the model takes samples of %s",
              path, npy_shape_text(&h, shape, sizeof shape),
              npy_shape_text(&sample, one, sizeof one), w->text);
    rc = -1;
  } else if (h.shape[0] == 0) {
    cli_error("predict: --input %s holds no sample", path);
    rc = -1;
  }
  /* The one case where "as they are" is likely not what was meant. */
  if (rc == 0 && h.type == NPY_U1 && w->dtype == LK_F32)
    cli_error("predict: warning: --input %s holds uint8 values, taken as "
              "they are (0 to 255); a net trained on scaled images (idx's "
              "or npy's normalize = scale: x / 255) expects them divided by "
              "255",
              path);
  bool swap = npy_swapped(&h);
  *n = rc == 0 ? (size_t)h.shape[0] : 0;
  *out = rc == 0 ? malloc(*n * w->numel * sizeof(float)) : NULL;
  if (rc == 0 && !*out) {
    cli_error("predict: out of memory for %zu samples of %s", *n, w->text);
    rc = -1;
  }
  for (uint64_t i = 0; rc == 0 && i < h.numel; i++)
    if (put(w, *out, (size_t)i, npy_value_at(&h, buf + h.offset, swap, i))) {
      cli_error("predict: --input %s: element %llu (sample %llu) is %g: not "
                "%s",
                path, (unsigned long long)i, (unsigned long long)(i / w->numel),
                npy_value_at(&h, buf + h.offset, swap, i),
                w->dtype == LK_I32 ? "a token (a whole number of i32)"
                                   : "a finite f32");
      rc = -1;
    }
  free(buf);
  if (rc != 0) {
    free(*out);
    *out = NULL;
  }
  return rc;
}

/* The numbers of LINE (NUL-terminated, no newline) into V (room for
 * MAX): their count, or -1 when a field is not a number (*BAD its
 * 1-based index). */
static long parse_line(char *line, double *v, size_t max, size_t *bad) {
  size_t k = 0;
  char *save = NULL;
  for (char *f = strtok_r(line, ",", &save); f;
       f = strtok_r(NULL, ",", &save)) {
    char *end;
    errno = 0;
    double x = strtod(f, &end);
    while (*end == ' ' || *end == '\t' || *end == '\r')
      end++;
    if (end == f || *end || errno == ERANGE) {
      *bad = k + 1;
      return -1;
    }
    if (k < max)
      v[k] = x;
    k++;
  }
  return (long)k;
}

static int read_csv(const char *path, const want *w, void **out, size_t *n) {
  unsigned char *buf;
  size_t len;
  if (slurp(path, &buf, &len) != 0)
    return -1;
  char *text = realloc(buf, len + 1);
  double *v = malloc((w->numel + 1) * sizeof *v);
  size_t cap = 0;
  *out = NULL;
  *n = 0;
  int rc = text && v ? 0 : -1;
  if (rc != 0)
    cli_error("predict: out of memory");
  else
    text[len] = '\0';
  char *next = rc == 0 ? text : NULL;
  for (size_t line = 1; next && rc == 0; line++) {
    char *s = next, *nl = strchr(s, '\n');
    next = nl ? nl + 1 : NULL;
    if (nl)
      *nl = '\0';
    if (strspn(s, " \t\r") == strlen(s))
      continue; /* a blank line, the last one's end */
    size_t bad = 0;
    long k = parse_line(s, v, w->numel + 1, &bad);
    if (k < 0 && line == 1)
      continue; /* a header */
    if (k < 0) {
      cli_error("predict: --input %s:%zu: field %zu is not a number", path,
                line, bad);
      rc = -1;
    } else if ((size_t)k != w->numel) {
      cli_error("predict: --input %s:%zu: %ld values, but the model takes "
                "samples of %s (%zu values; no label column)",
                path, line, k, w->text, w->numel);
      rc = -1;
    }
    if (rc == 0 && *n == cap) {
      size_t more = cap ? 2 * cap : 64;
      void *grown = realloc(*out, more * w->numel * sizeof(float));
      if (!grown) {
        cli_error("predict: out of memory");
        rc = -1;
      } else {
        *out = grown;
        cap = more;
      }
    }
    for (size_t j = 0; rc == 0 && j < w->numel; j++)
      if (put(w, *out, *n * w->numel + j, v[j])) {
        cli_error("predict: --input %s:%zu: value %zu is %g: not %s", path,
                  line, j + 1, v[j],
                  w->dtype == LK_I32 ? "a token (a whole number of i32)"
                                     : "a finite f32");
        rc = -1;
      }
    if (rc == 0)
      ++*n;
  }
  if (rc == 0 && *n == 0) {
    cli_error("predict: --input %s holds no sample", path);
    rc = -1;
  }
  free(text ? text : (char *)buf);
  free(v);
  if (rc != 0) {
    free(*out);
    *out = NULL;
  }
  return rc;
}

int cli_read_samples(const char *path, const lk_model *m, void **data,
                     size_t *n) {
  want w;
  want_of(m, &w);
  size_t len = strlen(path);
  bool npy = len >= 4 && strcmp(path + len - 4, ".npy") == 0;
  return npy ? read_npy(path, &w, data, n) : read_csv(path, &w, data, n);
}

/* The data plugin's batch_size in CFG ([plugins] data's section, NAME of
 * NAME:PLUGIN), or the bundled plugins' default, 64: --input is
 * predicted in the batches predict's test split would have. */
static size_t batch_size(const lk_config *cfg) {
  const lk_config_entry *d = lk_config_find(cfg, "plugins", "data");
  char section[128];
  if (!d ||
      snprintf(section, sizeof section, "%s", d->value) >= (int)sizeof section)
    return 64;
  section[strcspn(section, ":")] = '\0';
  const lk_config_entry *b = lk_config_find(cfg, section, "batch_size");
  char *end = NULL;
  unsigned long long v = b ? strtoull(b->value, &end, 10) : 0;
  return b && end && !*end && v > 0 && v < SIZE_MAX ? (size_t)v : 64;
}

int cli_open_infer(const cli_model_args *a, lk_model **m, size_t *batch) {
  lk_config *cfg = NULL;
  int rc = lk_config_load(a->config, &cfg);
  for (int i = 0; rc == 0 && i < a->n_sets; i++)
    rc = lk_config_set(cfg, a->sets[i]);
  if (rc == 0) {
    *batch = batch_size(cfg);
    rc = lk_model_open_config(cfg, a->ckpt, m);
  }
  lk_config_free(cfg);
  if (rc != 0) {
    cli_error("predict: %s", lk_last_error());
    return cli_model_status(rc);
  }
  return 0;
}

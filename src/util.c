/* Small helpers: strings, aligned memory, strict number parsing. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

char *lk__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d)
    memcpy(d, s, n);
  return d;
}

char *lk__asprintf(const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *s = n < 0 ? NULL : malloc((size_t)n + 1);
  if (s)
    vsnprintf(s, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return s;
}

void *lk__aligned_calloc(size_t n, size_t size) {
  if (size && n > SIZE_MAX / size)
    return NULL;
  size_t bytes = n * size;
  bytes = (bytes + 63) & ~(size_t)63;
  if (bytes == 0)
    bytes = 64;
  void *p = aligned_alloc(64, bytes);
  if (p)
    memset(p, 0, bytes);
  return p;
}

/* Whole string, no trailing junk apart from spaces. */
static int ends_clean(const char *end) {
  while (*end == ' ' || *end == '\t')
    end++;
  return *end == '\0';
}

int lk__parse_int(const char *s, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (end == s || !ends_clean(end) || errno == ERANGE)
    return LK_EINVAL;
  *out = v;
  return 0;
}

int lk__parse_double(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || !ends_clean(end) || (errno == ERANGE && isinf(v)))
    return LK_EINVAL;
  *out = v;
  return 0;
}

int lk__parse_bool(const char *s, bool *out) {
  if (strcmp(s, "true") == 0)
    *out = true;
  else if (strcmp(s, "false") == 0)
    *out = false;
  else
    return LK_EINVAL;
  return 0;
}

const char *lk_version(void) {
  return LK_VERSION;
}

/* Reads all of PATH into a malloc'd buffer with a NUL after the last byte.
 * WHAT ("config", "checkpoint") goes into the messages; a missing file is
 * LK_ENOTFOUND. PATH may be a pipe: the size is read, not trusted. */
int lk__read_file(const char *path, const char *what, char **out,
                  size_t *out_len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return lk__err(errno == ENOENT ? LK_ENOTFOUND : LK_EIO,
                   "cannot open %s %s: %s", what, path, strerror(errno));
  char *buf = NULL;
  size_t len = 0, cap = 0;
  int rc = 0;
  for (;;) {
    if (cap - len < 2) {
      size_t ncap = cap ? cap * 2 : 65536;
      char *nbuf = ncap > cap ? realloc(buf, ncap) : NULL;
      if (!nbuf) {
        rc = lk__err(LK_ENOMEM, "out of memory reading %s %s", what, path);
        break;
      }
      buf = nbuf;
      cap = ncap;
    }
    size_t got = fread(buf + len, 1, cap - len - 1, f);
    len += got;
    if (got == 0) {
      if (ferror(f))
        rc = lk__err(LK_EIO, "cannot read %s %s: %s", what, path,
                     strerror(errno));
      break;
    }
  }
  fclose(f);
  if (rc != 0) {
    free(buf);
    return rc;
  }
  buf[len] = '\0';
  *out = buf;
  *out_len = len;
  return 0;
}

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

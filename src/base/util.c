/* Small helpers: strings, aligned memory, strict number parsing. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
  size_t bytes;
  /* rounded up to 64 below: within 63 of SIZE_MAX that wraps to 0 */
  if (!lk_size_mul(n, size, &bytes) || bytes > SIZE_MAX - 63)
    return NULL;
  bytes = (bytes + 63) & ~(size_t)63;
  if (bytes == 0)
    bytes = 64;
  void *p = aligned_alloc(64, bytes);
  if (p)
    memset(p, 0, bytes);
  return p;
}

const char *lk__shape_text(const size_t *shape, size_t ndim, char *buf,
                           size_t len) {
  size_t used = (size_t)snprintf(buf, len, "[");
  for (size_t i = 0; i < ndim && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, "%s%zu", i ? ", " : "",
                             shape[i]);
  if (used < len)
    snprintf(buf + used, len - used, "]");
  return buf;
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

bool lk__column_name_ok(const char *name, size_t len) {
  if (!name || len == 0 || len >= LK__NAME_MAX)
    return false;
  for (size_t i = 0; i < len; i++)
    if (name[i] == ',' || name[i] == '"' || name[i] == '\n' ||
        name[i] == '\r' || name[i] == '\0')
      return false;
  return true;
}

const char *lk_version(void) {
  return LK_VERSION;
}

const char *lk__file_type(unsigned mode) {

  return S_ISREG(mode)    ? "a regular file"
         : S_ISDIR(mode)  ? "a directory"
         : S_ISLNK(mode)  ? "a symbolic link"
         : S_ISFIFO(mode) ? "a FIFO"
         : S_ISCHR(mode)  ? "a character device"
         : S_ISBLK(mode)  ? "a block device"
         : S_ISSOCK(mode) ? "a socket"
                          : "not a file";
}

/* Opens PATH for reading, refusing anything but a regular file: a FIFO
 * would block the run forever and a device such as /dev/zero never ends.
 * O_NONBLOCK keeps the open itself from waiting for a FIFO's writer; it is
 * cleared once the file is known to be regular. */
int lk_open_input(const char *path, const char *what, int *fd_out) {
  if (!path || !*path)
    return lk__err(LK_EINVAL, "%s: no path given", what ? what : "input");
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return lk__err(errno == ENOENT ? LK_ENOTFOUND : LK_EIO,
                   "cannot open %s %s: %s", what, path, strerror(errno));
  struct stat st;
  int rc = 0;
  if (fstat(fd, &st) != 0)
    rc = lk__err(LK_EIO, "cannot stat %s %s: %s", what, path, strerror(errno));
  else if (!S_ISREG(st.st_mode))
    rc =
        lk__err(LK_EIO, "%s %s is not a regular file (%s): refusing to read it",
                what, path, lk__file_type(st.st_mode));
  else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0)
    rc = lk__err(LK_EIO, "cannot read %s %s: %s", what, path, strerror(errno));
  if (rc != 0) {
    close(fd);
    return rc;
  }
  *fd_out = fd;
  return 0;
}

/* Reads all of PATH, a regular file of at most MAX bytes, into a malloc'd
 * buffer with a NUL after the last byte. WHAT ("config", "checkpoint")
 * goes into the messages; a missing file is LK_ENOTFOUND. ST, if not NULL,
 * gets the file's status as it was read. */
int lk__read_file(const char *path, const char *what, uint64_t max, char **out,
                  size_t *out_len, struct stat *st_out) {
  int fd;
  int rc = lk_open_input(path, what, &fd);
  if (rc != 0)
    return rc;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    rc = lk__err(LK_EIO, "cannot stat %s %s: %s", what, path, strerror(errno));
    close(fd);
    return rc;
  }
  if ((uint64_t)st.st_size > max || (uint64_t)st.st_size >= SIZE_MAX) {
    close(fd);
    return lk__err(LK_EINVAL,
                   "%s %s is %llu bytes, more than the %llu a %s may have",
                   what, path, (unsigned long long)st.st_size,
                   (unsigned long long)max, what);
  }
  size_t len = (size_t)st.st_size, got = 0;
  char *buf = malloc(len + 1);
  if (!buf) {
    close(fd);
    return lk__err(LK_ENOMEM, "out of memory reading %s %s (%zu bytes)", what,
                   path, len);
  }
  /* The size was read once: a file that grows meanwhile is read as it was;
   * one that shrinks is a short read, found by the caller's own checks. */
  while (got < len) {
    ssize_t n = read(fd, buf + got, len - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      rc =
          lk__err(LK_EIO, "cannot read %s %s: %s", what, path, strerror(errno));
      break;
    }
    if (n == 0)
      break;
    got += (size_t)n;
  }
  close(fd);
  if (rc != 0) {
    free(buf);
    return rc;
  }
  buf[got] = '\0';
  *out = buf;
  *out_len = got;
  if (st_out)
    *st_out = st;
  return 0;
}

/* The rename is durable only once the directory entry is on disk. */
int lk__sync_dir(const char *path) {
  const char *slash = strrchr(path, '/');
  size_t n = !slash ? 1 : slash == path ? 1 : (size_t)(slash - path);
  char *dir = malloc(n + 1);
  if (!dir)
    return lk__err(LK_ENOMEM, "out of memory");
  memcpy(dir, !slash ? "." : slash == path ? "/" : path, n);
  dir[n] = '\0';
  int rc = 0, fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  /* EINVAL: a file system that cannot sync directories; nothing to do. */
  if (fd < 0 || (fsync(fd) != 0 && errno != EINVAL))
    rc = lk__err(LK_EIO, "%s written, but directory %s not synced: %s", path,
                 dir, strerror(errno));
  if (fd >= 0)
    close(fd);
  free(dir);
  return rc;
}

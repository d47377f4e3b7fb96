/* Reading files that may be gzip-compressed (gz_read.h). */
#include "gz_read.h"

int gz_read_up_to(lk_host *host, gzFile f, const char *path, void *buf,
                  size_t len, size_t *got) {
  *got = 0;
  while (*got < len) {
    size_t want = len - *got < (1u << 30) ? len - *got : (1u << 30);
    int n = gzread(f, (unsigned char *)buf + *got, (unsigned)want);
    if (n > 0) {
      *got += (size_t)n;
      continue;
    }
    int err = Z_OK;
    const char *msg = gzerror(f, &err);
    if (err == Z_OK || err == Z_BUF_ERROR)
      return 0; /* end of file, or of a truncated stream */
    if (err == Z_ERRNO)
      return lk_fail(host, LK_EIO, "cannot read %s: %s", path, strerror(errno));
    if (err == Z_MEM_ERROR)
      return lk_fail(host, LK_ENOMEM, "out of memory reading %s", path);
    /* A damaged file, not a failed read. zlib's message starts with what
     * it was opened as ("<fd:3>: "), which the path says better. */
    if (msg[0] == '<' && strstr(msg, ">: "))
      msg = strstr(msg, ">: ") + 3;
    return lk_fail(host, LK_EFORMAT, "%s: corrupt gzip data: %s", path, msg);
  }
  return 0;
}

int gz_open(lk_host *host, const char *path, const char *what, gzFile *out,
            bool *gz) {
  int fd;
  int rc = lk_open_input(path, what, &fd);
  if (rc != 0)
    return rc; /* the host's message names the file */
  errno = 0;
  gzFile f = gzdopen(fd, "rb");
  if (!f) {
    close(fd);
    return lk_fail(host, LK_EIO, "cannot open %s: %s", path,
                   errno ? strerror(errno) : "out of memory");
  }
  gzbuffer(f, 1u << 17);
  *gz = gzdirect(f) == 0;
  *out = f;
  return 0;
}

int gz_slurp(lk_host *host, const char *path, const char *what, size_t max,
             unsigned char **out, size_t *len) {
  gzFile f = NULL;
  bool gz = false;
  int rc = gz_open(host, path, what, &f, &gz);
  if (rc != 0)
    return rc;
  size_t cap = 1u << 20, n = 0, got = 0;
  unsigned char *buf = malloc(cap);
  if (!buf)
    rc = lk_fail(host, LK_ENOMEM, "out of memory reading %s", path);
  while (rc == 0) {
    rc = gz_read_up_to(host, f, path, buf + n, cap - n, &got);
    n += got;
    if (rc != 0 || n < cap)
      break;
    if (cap > max) {
      rc = lk_fail(host, LK_EINVAL, "%s %s holds more than %zu bytes%s", what,
                   path, max, gz ? " (uncompressed)" : "");
      break;
    }
    unsigned char *more = realloc(buf, 2 * cap);
    if (!more)
      rc = lk_fail(host, LK_ENOMEM, "out of memory reading %s", path);
    else
      buf = more, cap *= 2;
  }
  int err = Z_OK;
  if (rc == 0 && gz) /* the stream ended before its end: a cut file */
    gzerror(f, &err);
  if (err == Z_BUF_ERROR)
    rc = lk_fail(host, LK_EFORMAT,
                 "%s is truncated: its gzip stream stops after %zu bytes "
                 "(uncompressed), before its end",
                 path, n);
  gzclose(f);
  if (rc == 0 && n > max)
    rc = lk_fail(host, LK_EINVAL, "%s %s holds more than %zu bytes%s", what,
                 path, max, gz ? " (uncompressed)" : "");
  if (rc != 0) {
    free(buf);
    return rc;
  }
  *out = buf;
  *len = n;
  return 0;
}

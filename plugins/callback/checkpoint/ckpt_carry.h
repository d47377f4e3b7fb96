/* Carrying a checkpoint file from one run directory into another, for the
 * checkpoint callback of a run resumed in a new directory: its kept list
 * (state) names files of the run it continues, which it links into its
 * own directory so that the directory holds what its state says it keeps.
 * A hard link when both are on one file system (nothing copied; deleting
 * one name leaves the other), else a copy written to a temporary file and
 * renamed into place (a killed copy leaves NAME.tmp-XXXXXX, which a
 * resumed run removes). The file it comes from is never changed. Static
 * inline: the plugin exports its descriptor only. */
#ifndef LOOPKIT_CKPT_CARRY_H
#define LOOPKIT_CKPT_CARRY_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Every directory of PATH's parent (PATH is a file's), from the first
 * missing one. Returns 0 or an errno. */
static inline int carry_dirs(char *path) {
  for (char *p = path + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    int e = mkdir(path, 0777) == 0 || errno == EEXIST ? 0 : errno;
    *p = '/';
    if (e)
      return e;
  }
  return 0;
}

/* SRC copied to DST through DST.tmp-XXXXXX. Returns 0 or an errno. */
static inline int carry_copy(const char *src, const char *dst) {
  size_t len = strlen(dst) + sizeof ".tmp-XXXXXX";
  char *tmp = malloc(len);
  if (!tmp)
    return ENOMEM;
  snprintf(tmp, len, "%s.tmp-XXXXXX", dst);
  int in = open(src, O_RDONLY | O_CLOEXEC), out = in < 0 ? -1 : mkstemp(tmp);
  int e = in < 0 || out < 0 ? errno : 0;
  char buf[65536];
  ssize_t n = 0;
  while (!e && (n = read(in, buf, sizeof buf)) != 0) {
    if (n < 0 && errno == EINTR)
      continue;
    for (ssize_t at = 0; !e && n > 0 && at < n;) {
      ssize_t w = write(out, buf + at, (size_t)(n - at));
      if (w < 0 && errno != EINTR)
        e = errno;
      at += w > 0 ? w : 0;
    }
    if (n < 0)
      e = errno;
  }
  if (!e && (fchmod(out, 0644) != 0 || fsync(out) != 0))
    e = errno;
  if (out >= 0 && close(out) != 0 && !e)
    e = errno;
  if (in >= 0)
    close(in);
  if (!e && rename(tmp, dst) != 0)
    e = errno;
  if (e && out >= 0)
    unlink(tmp);
  free(tmp);
  return e;
}

/* SRC's file at DST too, unless DST is there already. Returns 0, ENOENT
 * when SRC is gone, or another errno. */
static inline int carry_file(const char *src, const char *dst) {
  struct stat st;
  if (lstat(dst, &st) == 0)
    return 0;
  if (stat(src, &st) != 0)
    return errno;
  char *dirs = malloc(strlen(dst) + 1);
  if (!dirs)
    return ENOMEM;
  strcpy(dirs, dst);
  int e = carry_dirs(dirs);
  free(dirs);
  if (e)
    return e;
  if (link(src, dst) == 0)
    return 0;
  return errno == EEXIST ? 0 : carry_copy(src, dst);
}

#endif

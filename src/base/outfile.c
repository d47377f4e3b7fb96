/* Every file loopkit writes goes through here: the files a user names
 * (predict -o, export -o, plot -o) and those of a run directory
 * (config.ini, metrics.csv, checkpoints, a profiler's report). What is at
 * the path decides how it is written:
 *
 *   "-"                       the standard output;
 *   a character device, FIFO  written as it is: opened without O_CREAT or
 *                             O_TRUNC and never renamed over, so that
 *                             /dev/null stays a device and a FIFO's reader
 *                             gets the bytes;
 *   nothing, a regular file   a new temporary file beside it, synced, then
 *                             renamed over the path only when all of it was
 *                             written: an existing file is replaced whole
 *                             or not at all, and keeps its mode;
 *   a symbolic link           refused, not followed: replacing or filling
 *                             what a link points to is how a link planted
 *                             in /tmp by another user gets root to destroy
 *                             a file of its choice (a link in a directory
 *                             above the file is followed as always);
 *   anything else             refused: a directory, socket, block device.
 *
 * A temporary name is PATH.tmp-XXXXXX, six random letters and digits from
 * getrandom, created with O_CREAT | O_EXCL | O_NOFOLLOW: whatever another
 * user plants under a name is never opened, only skipped. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "outfile.h"

#define TMP_INFIX ".tmp-"
#define TMP_RANDOM 6
/* A long file name is cut in its temporary's name, which must stay
 * within NAME_MAX (255) with the infix and the random letters. */
#define TMP_BASE_MAX 200
/* EEXIST on every try: names planted faster than they can be guessed, or
 * no randomness. */
#define TMP_TRIES 100

typedef enum target {
  TO_STDOUT, /* "-" */
  TO_STREAM, /* a character device or a FIFO, written through */
  TO_FILE    /* a temporary file renamed over the path */
} target;

struct lk_output {
  target to;
  FILE *f;
  char *path;
  char *what; /* "" when not given */
  char *tmp;  /* TO_FILE */
  bool existed;
  struct stat was; /* TO_FILE, existed: the file being replaced */
};

/* "WHAT PATH", or PATH when there is no WHAT, for messages. */
#define NAMED(what, path) (what), *(what) ? " " : "", (path)

/* The refusal of PATH, whose lstat is ST: a link says where it leads. */
static int refuse(const char *what, const char *path, const struct stat *st) {
  if (!S_ISLNK(st->st_mode))
    return lk__err(LK_EINVAL, "%s%s%s is %s: refusing to write over it",
                   NAMED(what, path), lk__file_type(st->st_mode));
  char to[512];
  ssize_t n = readlink(path, to, sizeof to - 1);
  to[n > 0 ? (size_t)n : 0] = '\0';
  return lk__err(LK_EINVAL,
                 "%s%s%s is a symbolic link (to %s): loopkit never writes "
                 "through a link; name the file itself (or - for the "
                 "standard output)",
                 NAMED(what, path), n > 0 ? to : "?");
}

/* N letters and digits nobody can predict into OUT. getrandom cannot fail
 * on Linux >= 3.17 once the pool is up; before that, the time, a stack
 * address (ASLR) and a
 * counter still give a new name each try (O_EXCL keeps any name safe; a
 * guessable one only lets another user make the open fail). */
static void random_letters(char *out, size_t n) {
  static const char set[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  static uint64_t counter;
  unsigned char r[TMP_RANDOM];
  if (n > sizeof r)
    n = sizeof r;
  if (getrandom(r, n, GRND_NONBLOCK) != (ssize_t)n) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
                 ((uint64_t)(uintptr_t)&ts << 12) ^
                 __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    for (size_t i = 0; i < n; i++) { /* splitmix64 */
      uint64_t z = (x += 0x9e3779b97f4a7c15u);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
      r[i] = (unsigned char)(z ^ (z >> 31));
    }
  }
  for (size_t i = 0; i < n; i++)
    out[i] = set[r[i] % (sizeof set - 1)];
}

/* PATH.tmp-XXXXXX, the X to be filled by random_letters; NULL when out of
 * memory. */
static char *temp_name(const char *path) {
  const char *slash = strrchr(path, '/');
  size_t dir = slash ? (size_t)(slash + 1 - path) : 0;
  size_t base = strlen(path + dir);
  if (base > TMP_BASE_MAX)
    base = TMP_BASE_MAX;
  size_t len = dir + base + sizeof TMP_INFIX - 1 + TMP_RANDOM;
  char *name = malloc(len + 1);
  if (name) {
    memcpy(name, path, dir + base);
    memcpy(name + dir + base, TMP_INFIX, sizeof TMP_INFIX - 1);
    memset(name + len - TMP_RANDOM, 'X', TMP_RANDOM);
    name[len] = '\0';
  }
  return name;
}

/* Fills NAME's last TMP_RANDOM characters anew. */
static void next_name(char *name) {
  random_letters(name + strlen(name) - TMP_RANDOM, TMP_RANDOM);
}

/* A new file beside PATH, PATH.tmp-XXXXXX, created with MODE (the umask
 * applies) and never through a link; its name into *TMP. -1 with errno. */
static int create_temp(const char *path, mode_t mode, char **tmp) {
  char *name = temp_name(path);
  if (!name) {
    errno = ENOMEM;
    return -1;
  }
  int fd = -1;
  for (int i = 0; i < TMP_TRIES && fd < 0; i++) {
    next_name(name);
    fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0 && errno != EEXIST)
      break;
  }
  if (fd < 0) {
    int e = errno;
    free(name);
    errno = e;
    return -1;
  }
  *tmp = name;
  return fd;
}

static void output_free(lk_output *o) {
  if (o->tmp) {
    unlink(o->tmp);
    free(o->tmp);
  }
  free(o->path);
  free(o->what);
  free(o);
}

/* A character device or a FIFO at PATH (lstat ST), opened as it is. The
 * open blocks until a FIFO has a reader, as a shell's redirection does. */
static int open_stream(lk_output *o, const struct stat *st) {
  int fd = open(o->path, O_WRONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
  struct stat now;
  if (fd < 0)
    return lk__err(LK_EIO, "cannot open %s%s%s: %s", NAMED(o->what, o->path),
                   strerror(errno));
  /* Replaced between the lstat and the open: refused, not guessed at. */
  if (fstat(fd, &now) != 0 || now.st_dev != st->st_dev ||
      now.st_ino != st->st_ino ||
      (now.st_mode & S_IFMT) != (st->st_mode & S_IFMT)) {
    close(fd);
    return lk__err(LK_EIO, "%s%s%s changed while it was opened",
                   NAMED(o->what, o->path));
  }
  if (!(o->f = fdopen(fd, "w"))) {
    int e = errno;
    close(fd);
    return lk__err(LK_EIO, "cannot open %s%s%s: %s", NAMED(o->what, o->path),
                   strerror(e));
  }
  o->to = TO_STREAM;
  return 0;
}

/* A temporary file for PATH, new (EXISTED false) or replacing the regular
 * file whose lstat is WAS: created with that file's mode, and given it
 * again past the umask, so that it is never readable by more than the
 * file it replaces. */
static int open_temp(lk_output *o) {
  mode_t mode = o->existed ? o->was.st_mode & 0777 : 0666;
  int fd = create_temp(o->path, mode, &o->tmp);
  if (fd < 0)
    return lk__err(LK_EIO, "cannot create %s%s%s: %s", NAMED(o->what, o->path),
                   strerror(errno));
  if ((o->existed && fchmod(fd, mode) != 0) || !(o->f = fdopen(fd, "wb"))) {
    int e = errno;
    close(fd);
    return lk__err(LK_EIO, "cannot create %s%s%s: %s: %s",
                   NAMED(o->what, o->path), o->tmp, strerror(e));
  }
  o->to = TO_FILE;
  return 0;
}

int lk_output_open(const char *path, const char *what, lk_output **out) {
  if (!out)
    return lk__err(LK_EINVAL, "lk_output_open: NULL out");
  *out = NULL;
  if (!path || !*path)
    return lk__err(LK_EINVAL, "%s: no path given to write",
                   what ? what : "output");
  lk_output *o = calloc(1, sizeof *o);
  if (!o || !(o->path = lk__strdup(path)) ||
      !(o->what = lk__strdup(what ? what : ""))) {
    if (o)
      output_free(o);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  struct stat st;
  int rc = 0;
  if (!strcmp(path, "-")) {
    o->to = TO_STDOUT;
    o->f = stdout;
  } else if (lstat(path, &st) == 0) {
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))
      rc = open_stream(o, &st);
    else if (!S_ISREG(st.st_mode))
      rc = refuse(o->what, path, &st);
    else {
      o->existed = true;
      o->was = st;
      rc = open_temp(o);
    }
  } else if (errno != ENOENT)
    rc = lk__err(LK_EIO, "cannot write %s%s%s: %s", NAMED(o->what, path),
                 strerror(errno));
  else if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
    rc = lk__err(LK_EINVAL, "%s%s%s names a directory, not a file",
                 NAMED(o->what, path));
  else
    rc = open_temp(o);
  if (rc != 0) {
    output_free(o);
    return rc;
  }
  *out = o;
  return 0;
}

FILE *lk_output_stream(lk_output *o) {
  return o ? o->f : NULL;
}

/* Flushes and closes a TO_FILE's stream, syncs it and renames it over the
 * path: 0 or an errno, with *STEP what failed. */
static int finish_file(lk_output *o, const char **step) {
  int fd = fileno(o->f), e = 0;
  *step = "cannot write";
  errno = 0;
  if (fflush(o->f) != 0 || ferror(o->f))
    e = errno ? errno : EIO;
  if (!e && fsync(fd) != 0)
    e = errno;
  /* The owner and group too, where the caller may give them (root; a
   * failure leaves the file the caller's, as any new file is). */
  if (!e && o->existed &&
      (o->was.st_uid != geteuid() || o->was.st_gid != getegid()) &&
      fchown(fd, o->was.st_uid, o->was.st_gid) != 0)
    errno = 0;
  if (fclose(o->f) != 0 && !e)
    e = errno;
  o->f = NULL;
  if (!e && rename(o->tmp, o->path) != 0) {
    e = errno;
    *step = "cannot rename the temporary file over";
  }
  if (!e) {
    free(o->tmp); /* it is the file now */
    o->tmp = NULL;
  }
  return e;
}

int lk_output_close(lk_output *o, bool keep) {
  if (!o)
    return 0;
  int e = 0, rc = 0;
  const char *step = "cannot write";
  errno = 0;
  if (o->to == TO_STDOUT) {
    if (fflush(stdout) != 0 || ferror(stdout))
      e = errno ? errno : EIO;
  } else if (o->to == TO_STREAM) {
    if (fflush(o->f) != 0 || ferror(o->f))
      e = errno ? errno : EIO;
    if (fclose(o->f) != 0 && !e)
      e = errno;
  } else if (keep) {
    e = finish_file(o, &step);
  } else {
    fclose(o->f);
  }
  if (keep && e)
    rc = lk__err(
        LK_EIO, "%s %s%s%s: %s", step,
        NAMED(o->what, o->to == TO_STDOUT ? "the standard output" : o->path),
        strerror(e));
  else if (keep && o->to == TO_FILE)
    rc = lk__sync_dir(o->path);
  output_free(o);
  return rc;
}

int lk__output_check_file(const char *path, const char *what) {
  struct stat st;
  if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
    return refuse(what ? what : "", path, &st);
  return 0;
}

int lk__output_append(const char *path, const char *what, FILE **out) {
  int rc = lk__output_check_file(path, what);
  if (rc != 0)
    return rc;
  struct stat st;
  int fd =
      open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0)
    return lk__err(LK_EIO, "cannot open %s%s%s: %s",
                   NAMED(what ? what : "", path), strerror(errno));
  FILE *f = NULL;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !(f = fdopen(fd, "a"))) {
    close(fd);
    return lk__err(LK_EIO, "cannot append to %s%s%s: not a regular file, or %s",
                   NAMED(what ? what : "", path), strerror(errno));
  }
  *out = f;
  return 0;
}

int lk__output_link(const char *existing, const char *path) {
  char *tmp = temp_name(path);
  if (!tmp)
    return lk__err(LK_ENOMEM, "out of memory");
  int rc = -1;
  for (int i = 0; i < TMP_TRIES && rc != 0; i++) {
    next_name(tmp);
    /* link neither follows a link at the new name nor replaces anything */
    rc = link(existing, tmp);
    if (rc != 0 && errno != EEXIST)
      break;
  }
  int e = errno;
  if (rc == 0 && rename(tmp, path) != 0) {
    e = errno;
    unlink(tmp);
    rc = -1;
  }
  free(tmp);
  if (rc != 0)
    return lk__err(LK_EIO, "cannot make %s another name of %s: %s", path,
                   existing, strerror(e));
  return 0;
}

bool lk__output_is_temp(const char *name) {
  const char *at = strstr(name, TMP_INFIX), *next;
  if (!at)
    return false;
  while ((next = strstr(at + 1, TMP_INFIX)))
    at = next;
  const char *p = at + sizeof TMP_INFIX - 1;
  if (!*p)
    return false;
  for (; *p; p++)
    if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
          (*p >= '0' && *p <= '9') || *p == '-'))
      return false;
  return true;
}

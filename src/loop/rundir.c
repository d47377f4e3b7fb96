/* The run directory: which directory a run writes (a new one, --out, or
 * the run a resume continues), the lock that keeps a second writer out of
 * it, the leftovers a killed run leaves, the files it holds (config.ini,
 * metrics.csv, checkpoints/), and how checkpoints are written, linked and
 * pruned. When they are written, and what callbacks keep, is the policy's
 * (ckpt_policy.c); the checkpoint format itself is checkpoint.c's; what a
 * checkpoint's values mean is resume.c's.
 *
 * A resume continues a run in place only from that run's latest
 * checkpoint: DIR/checkpoints/last.ckpt (or the step-N.ckpt it is a link
 * of). Continuing from an older one would cut the run's metrics.csv and
 * replace its last.ckpt, losing what came after; so any other checkpoint,
 * or one outside a run directory, starts a new run directory seeded from
 * it, as Lightning starts a new version. The same rule says which run a
 * checkpoint belongs to, and so which config.ini it was trained with, for
 * the commands that use a trained model (lk_checkpoint_run_config). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "loop.h"
#include "outfile.h"

#define LOCK_NAME ".lock"

/* ---- paths -------------------------------------------------------------- */

static int mkdir_p(const char *path) {
  char *copy = lk__strdup(path);
  if (!copy)
    return lk__err(LK_ENOMEM, "out of memory");
  int rc = 0;
  for (char *p = copy + 1; *p && rc == 0; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(copy, 0777) != 0 && errno != EEXIST)
      rc = lk__err(LK_EIO, "cannot create directory %s: %s", copy,
                   strerror(errno));
    *p = '/';
  }
  if (rc == 0 && mkdir(copy, 0777) != 0 && errno != EEXIST)
    rc = lk__err(LK_EIO, "cannot create directory %s: %s", copy,
                 strerror(errno));
  free(copy);
  return rc;
}

static bool exists(const char *dir, const char *name) {
  char *path = lk__asprintf("%s/%s", dir, name);
  bool there = path && access(path, F_OK) == 0;
  free(path);
  return there;
}

/* A run's files are there: config.ini, metrics.csv or checkpoints/. */
static bool holds_run(const char *dir) {
  return exists(dir, "config.ini") || exists(dir, "metrics.csv") ||
         exists(dir, "checkpoints");
}

static bool same_file(const struct stat *a, const struct stat *b) {
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

static bool same_dir(const char *a, const char *b) {
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && same_file(&sa, &sb);
}

/* DIR when PATH is DIR/checkpoints (DIR "." for "checkpoints"), else
 * NULL; *OOM when out of memory. */
static char *above_checkpoints(const char *path, size_t len, bool *oom) {
  const char *name = path + len;
  while (name > path && name[-1] != '/')
    name--;
  if ((size_t)(path + len - name) != strlen("checkpoints") ||
      strncmp(name, "checkpoints", strlen("checkpoints")) != 0)
    return NULL;
  char *up = name == path ? lk__strdup(".")
             : name - 1 == path
                 ? lk__strdup("/")
                 : lk__asprintf("%.*s", (int)(name - 1 - path), path);
  *oom = !up;
  return up;
}

/* DIR when CKPT is DIR/checkpoints/FILE of a run directory (DIR holds a
 * config.ini), or DIR/checkpoints/NAME/FILE (a named checkpoint callback's
 * own directory), else NULL. *OUT is NULL on success too when it is not. */
static int source_run(const char *ckpt, char **out) {
  *out = NULL;
  char *copy = lk__strdup(ckpt), *up = NULL;
  if (!copy)
    return lk__err(LK_ENOMEM, "out of memory");
  char *ckdir = dirname(copy);
  const char *name = strrchr(ckdir, '/') ? strrchr(ckdir, '/') + 1 : ckdir;
  bool oom = false;
  if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
    /* resumed from inside DIR/checkpoints: ckdir is "." or ends so */
    char *abs = realpath(ckdir, NULL);
    char *base = abs ? strrchr(abs, '/') : NULL;
    if (base && strcmp(base + 1, "checkpoints") == 0)
      oom = !(up = lk__asprintf("%s/..", ckdir));
    free(abs);
  } else if (!(up = above_checkpoints(ckdir, strlen(ckdir), &oom)) && !oom &&
             name != ckdir) {
    up = above_checkpoints(ckdir, (size_t)(name - 1 - ckdir), &oom);
  }
  free(copy);
  if (oom)
    return lk__err(LK_ENOMEM, "out of memory");
  if (up && !exists(up, "config.ini")) {
    free(up);
    up = NULL;
  }
  *out = up;
  return 0;
}

int lk__ckpt_run_dir(const char *ckpt, char **out) {
  int rc = source_run(ckpt, out);
  struct stat st;
  if (rc != 0 || *out || lstat(ckpt, &st) != 0 || !S_ISLNK(st.st_mode))
    return rc;
  /* A link to a run's checkpoint (models/best.ckpt): the run of the file
   * it names. */
  char *real = realpath(ckpt, NULL);
  if (real)
    rc = source_run(real, out);
  free(real);
  return rc;
}

int lk_checkpoint_run_config(const char *ckpt, char *buf, size_t len) {
  if (!ckpt || !*ckpt || !buf)
    return lk__err(LK_EINVAL, "lk_checkpoint_run_config: NULL checkpoint or "
                              "buffer");
  if (len)
    buf[0] = '\0';
  if (access(ckpt, F_OK) != 0)
    return errno == ENOENT
               ? lk__err(LK_ENOTFOUND, "%s: no such checkpoint", ckpt)
               : lk__err(LK_EIO, "cannot reach checkpoint %s: %s", ckpt,
                         strerror(errno));
  char *dir = NULL;
  int rc = lk__ckpt_run_dir(ckpt, &dir);
  if (rc != 0)
    return rc;
  if (!dir)
    return lk__err(LK_ENOTFOUND,
                   "%s is in no run directory (a run's checkpoints are "
                   "RUN/checkpoints/NAME, beside RUN/config.ini)",
                   ckpt);
  int n = snprintf(buf, len, "%s/config.ini", dir);
  rc = n >= 0 && (size_t)n < len
           ? 0
           : lk__err(LK_EINVAL, "%s/config.ini: longer than %zu bytes", dir,
                     len ? len - 1 : 0);
  if (rc != 0 && len)
    buf[0] = '\0';
  free(dir);
  return rc;
}

/* ---- the lock ----------------------------------------------------------- */

/* DIR/.lock, held with flock for the run's whole life (the kernel drops it
 * when the process ends, however it ends). It holds the holder's pid, for
 * the message a second writer gets. The file stays: removing it would let a
 * process that opened it just before lock a file nobody else sees. */
static int lock_dir(lk__rundir *rd, const char *dir) {
  char *path = lk__asprintf("%s/" LOCK_NAME, dir);
  if (!path)
    return lk__err(LK_ENOMEM, "out of memory");
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    int rc = lk__err(LK_EIO, "cannot lock run directory %s: cannot open %s: %s",
                     dir, path, strerror(errno));
    free(path);
    return rc;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    char pid[32] = "";
    ssize_t n = e == EWOULDBLOCK ? pread(fd, pid, sizeof pid - 1, 0) : -1;
    pid[n > 0 ? (size_t)n : 0] = '\0';
    pid[strcspn(pid, "\n")] = '\0';
    close(fd);
    int rc = e == EWOULDBLOCK
                 ? lk__err(LK_ECONFIG,
                           "run directory %s is in use by another loopkit "
                           "(pid %s holds %s): wait for it to end, or choose "
                           "another --out",
                           dir, *pid ? pid : "unknown", path)
                 : lk__err(LK_EIO, "cannot lock %s: %s", path, strerror(e));
    free(path);
    return rc;
  }
  char pid[32];
  int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
    int rc = lk__err(LK_EIO, "cannot write %s: %s", path, strerror(errno));
    close(fd);
    free(path);
    return rc;
  }
  free(path);
  rd->lock_fd = fd;
  return 0;
}

/* ---- choosing the directory --------------------------------------------- */

/* The name a new run directory takes from its config: the file's name
 * without its extension, or, for a run directory's own config.ini (a
 * resume from a run's older checkpoint), that run's name without its -N:
 * runs/es-1/config.ini gives es, and the new run is runs/es-M. */
static char *run_name(const char *config_path) {
  char *copy = lk__strdup(config_path);
  if (!copy)
    return NULL;
  char *base = basename(copy);
  if (strcmp(base, "config.ini") == 0) {
    char *up = lk__strdup(config_path);
    char *dir = up ? dirname(up) : NULL;
    if (dir && holds_run(dir) && exists(dir, "checkpoints")) {
      char *abs = realpath(dir, NULL);
      char *name = abs ? basename(abs) : NULL;
      size_t n = name ? strlen(name) : 0, d = n;
      while (d > 0 && name[d - 1] >= '0' && name[d - 1] <= '9')
        d--;
      if (name && d > 1 && d < n && name[d - 1] == '-')
        name[d - 1] = '\0';
      if (name && *name && strcmp(name, "/") != 0) {
        free(copy);
        copy = lk__strdup(name);
        base = copy;
      }
      free(abs);
    }
    free(up);
    if (!copy)
      return NULL;
  }
  char *dot = strrchr(base, '.');
  if (dot && dot != base)
    *dot = '\0';
  char *name = lk__strdup(base);
  free(copy);
  return name;
}

/* runs/<config name>-<N>: the first N whose directory mkdir creates, so two
 * runs never share one. */
static int new_run_dir(lk__rundir *rd, const char *config_path) {
  char *copy = run_name(config_path);
  if (!copy)
    return lk__err(LK_ENOMEM, "out of memory");
  char *base = copy;
  int rc = mkdir_p("runs");
  for (unsigned n = 1; rc == 0 && n < 1000000; n++) {
    char *dir = lk__asprintf("runs/%s-%u", base, n);
    if (!dir) {
      rc = lk__err(LK_ENOMEM, "out of memory");
      break;
    }
    if (mkdir(dir, 0777) == 0) {
      rd->dir = dir;
      break;
    }
    int e = errno;
    free(dir);
    if (e != EEXIST)
      rc =
          lk__err(LK_EIO, "cannot create runs/%s-%u: %s", base, n, strerror(e));
  }
  free(copy);
  return rc;
}

/* A run killed while it wrote leaves temporary files behind: a checkpoint
 * or metrics.csv rewrite whose rename never happened (the file it was
 * replacing is still whole), curves.png being drawn. Only loopkit's own
 * patterns are removed. */
static void remove_leftovers(const char *dir, bool checkpoints) {
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (lk__output_is_temp(e->d_name) ||
        (checkpoints && !strcmp(e->d_name, "last.ckpt.link"))) {
      char *path = lk__asprintf("%s/%s", dir, e->d_name);
      if (path)
        unlink(path);
      free(path);
    }
  if (d)
    closedir(d);
}

/* Whether CKPT (its status ST) is DIR's latest checkpoint. */
static bool is_latest(const char *dir, const struct stat *st) {
  char *last = lk__asprintf("%s/checkpoints/last.ckpt", dir);
  struct stat ls;
  bool yes = last && stat(last, &ls) == 0 && same_file(&ls, st);
  free(last);
  return yes;
}

/* [plugins] precision of CFG, "none" when it has none. */
static const char *precision_of(const lk_config *cfg) {
  const lk_config_entry *e = lk_config_find(cfg, "plugins", "precision");
  return e && e->value[0] ? e->value : "none";
}

/* A resume under another precision plugin than the run that wrote the
 * checkpoint (SRC, its run directory) had is allowed: parameters,
 * gradients and optimizer state are f32 under every precision, so the
 * checkpoint is the same either way. It is said, since the run then goes
 * on with other arithmetic. A SRC whose config.ini cannot be read says
 * nothing (resuming does not need it). */
static void say_precision(const lk_run *run, const lk_config *cfg,
                          const char *src) {
  char *path = lk__asprintf("%s/config.ini", src);
  lk_config *old = NULL;
  if (path && lk_config_load(path, &old) == 0) {
    const char *was = precision_of(old), *now = precision_of(cfg);
    if (strcmp(was, now) != 0)
      lk__log(&run->env, LK_LOG_WARN,
              "--resume %s: its run trained with [plugins] precision = %s, "
              "this one goes on with precision = %s (the checkpoint's "
              "parameters and optimizer state are f32 under both)",
              run->opts.resume, was, now);
  }
  lk_config_free(old);
  free(path);
}

/* Where a resume from CKPT writes, and whether it continues the run that
 * wrote it. */
static int plan(lk_run *run, const char *config_path, const struct stat *ck_st,
                char **src) {
  lk__rundir *rd = &run->rd;
  const char *out = run->opts.out_dir, *ckpt = run->opts.resume;
  int rc = source_run(ckpt, src);
  if (rc != 0)
    return rc;
  bool latest = *src && is_latest(*src, ck_st);
  if (out && *src && same_dir(out, *src)) {
    if (!latest)
      return lk__err(
          LK_ECONFIG,
          "--resume %s with --out %s: %s wrote that checkpoint, and it is not "
          "its latest (that is %s/checkpoints/last.ckpt); continuing there "
          "would cut what the run did after it. Resume from last.ckpt, or "
          "give another --out (the run is then continued in a new "
          "directory)",
          ckpt, out, out, out);
    rd->in_place = true;
    rd->dir = lk__strdup(out);
  } else if (!out && latest) {
    rd->in_place = true;
    rd->dir = lk__strdup(*src);
  } else if (out) {
    rd->dir = lk__strdup(out);
  } else {
    return new_run_dir(rd, config_path);
  }
  return rd->dir ? 0 : lk__err(LK_ENOMEM, "out of memory");
}

/* ---- metrics.csv -------------------------------------------------------- */

/* A new run's metrics.csv, seeded with the first ROWS data rows of SRC
 * (the run a resumed checkpoint came from): the new run's file is then
 * whole from step 0. False when SRC does not have them. */
static int seed_metrics(const char *path, const char *src, uint64_t rows,
                        bool *seeded) {
  *seeded = false;
  FILE *in = fopen(src, "r");
  if (!in)
    return 0;
  lk_output *o = NULL;
  int rc = lk_output_open(path, "metrics", &o);
  FILE *out = lk_output_stream(o);
  uint64_t lines = 0;
  int c = 0;
  while (rc == 0 && lines < rows + 1 && (c = getc(in)) != EOF) {
    if (putc(c, out) == EOF)
      rc = lk__err(LK_EIO, "cannot write %s: %s", path, strerror(errno));
    lines += c == '\n';
  }
  fclose(in);
  bool whole = rc == 0 && lines == rows + 1;
  int closed = lk_output_close(o, whole);
  *seeded = whole && closed == 0;
  return rc ? rc : closed;
}

static int open_metrics(lk_run *run, const char *src) {
  lk__rundir *rd = &run->rd;
  char *path = lk__asprintf("%s/metrics.csv", rd->dir);
  char *src_path = src ? lk__asprintf("%s/metrics.csv", src) : NULL;
  int rc = path && (!src || src_path) ? 0 : lk__err(LK_ENOMEM, "out of memory");
  int64_t keep = -1;
  if (rc == 0 && run->resumed && rd->in_place) {
    keep = (int64_t)run->state.metrics_rows;
  } else if (rc == 0 && run->resumed) {
    bool seeded = false;
    if (src_path)
      rc = seed_metrics(path, src_path, run->state.metrics_rows, &seeded);
    if (rc == 0 && seeded)
      lk__log(&run->env, LK_LOG_INFO,
              "%s/metrics.csv starts with the %llu rows %s had logged up to "
              "the checkpoint",
              rd->dir, (unsigned long long)run->state.metrics_rows, src);
    else if (rc == 0) {
      if (run->state.metrics_rows > 0)
        lk__log(&run->env, LK_LOG_INFO,
                "%s/metrics.csv starts at step %llu: the rows before the "
                "checkpoint are not at hand",
                rd->dir, (unsigned long long)run->state.progress.global_step);
      run->state.metrics_rows = 0;
    }
    keep = (int64_t)run->state.metrics_rows;
  }
  if (rc == 0)
    rc = lk__metrics_open(path, keep, &run->rows.csv);
  free(path);
  free(src_path);
  return rc;
}

/* ---- opening ------------------------------------------------------------- */

/* The checkpoints directory exists, is a directory and takes files: found
 * now, not when the first checkpoint is due. */
static int check_checkpoints_dir(const char *dir) {
  int rc = mkdir_p(dir);
  struct stat st;
  if (rc == 0 && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)))
    rc = lk__err(LK_EIO, "%s is not a directory: checkpoints cannot be written",
                 dir);
  /* A file begun and dropped: its temporary file is made and removed. */
  char *probe = rc == 0 ? lk__asprintf("%s/probe", dir) : NULL;
  if (rc == 0 && !probe)
    rc = lk__err(LK_ENOMEM, "out of memory");
  lk_output *o = NULL;
  if (rc == 0 && (rc = lk_output_open(probe, NULL, &o)) != 0)
    rc = lk__err_prefix(rc, "cannot write checkpoints in %s", dir);
  lk_output_close(o, false);
  free(probe);
  return rc;
}

/* ---- config.ini ------------------------------------------------------------
 *
 * The effective config, then comment lines, one for each time the run was
 * resumed with another config than its own (a --set, or another file):
 * config.ini is always what `loopkit train --resume DIR` goes on with, and
 * the comments say how it came to be. */

#define HISTORY "# resumed "

/* "# resumed DATE[ from FROM] at epoch E, step S[ with --set A ...]", or
 * NULL when out of memory. */
static char *history_line(const lk_run *run, const lk_config *src,
                          const char *from) {
  time_t now = time(NULL);
  struct tm tm;
  char date[32] = "";
  if (gmtime_r(&now, &tm))
    strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", &tm);
  const lk__progress *p = &run->state.progress;
  char *line = lk__asprintf(HISTORY "%s%s%s at epoch %llu, step %llu", date,
                            from ? " from " : "", from ? from : "",
                            (unsigned long long)p->epoch,
                            (unsigned long long)p->global_step);
  for (size_t i = 0; line && i < lk__config_n_overrides(src); i++) {
    char *longer = lk__asprintf("%s%s --set %s", line, i ? "" : " with",
                                lk__config_override_at(src, i)->arg);
    free(line);
    line = longer;
  }
  if (line && run->set_effects) { /* the checkpoint's values they changed */
    char *longer =
        lk__asprintf("%s; from step %llu: %s", line,
                     (unsigned long long)p->global_step, run->set_effects);
    free(line);
    line = longer;
  }
  return line;
}

/* Splits OLD (a config.ini) into its history lines, appended to *HIST, and
 * whether the rest is TEXT (blank lines aside). */
static bool same_body(const char *old, size_t old_len, const char *text,
                      FILE *hist) {
  const char *t = text;
  bool same = true;
  for (const char *p = old, *end = old + old_len; p < end;) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
    if (n >= strlen(HISTORY) && !memcmp(p, HISTORY, strlen(HISTORY)))
      fprintf(hist, "%.*s\n", (int)n, p);
    else if (n > 0 || *t == '\n') { /* a line of the body */
      same = same && !strncmp(t, p, n) && t[n] == '\n';
      if (same)
        t += n + 1;
    }
    p += n + 1;
  }
  return same && !*t;
}

/* Writes TEXT and TAIL to DIR/config.ini, replaced whole (a crash leaves
 * the old or the new). */
static int replace_config(const char *dir, const char *text, size_t len,
                          const char *tail) {
  char *path = lk__asprintf("%s/config.ini", dir);
  if (!path)
    return lk__err(LK_ENOMEM, "out of memory");
  lk_output *o;
  int rc = lk_output_open(path, "config", &o);
  if (rc == 0) {
    FILE *f = lk_output_stream(o);
    fwrite(text, 1, len, f);
    fputs(tail, f);
    rc = lk_output_close(o, true); /* which checks the stream's errors */
  }
  free(path);
  return rc;
}

/* A new run's config.ini; a resumed one (in a new directory) says which
 * checkpoint it came from. */
static int write_config(lk_run *run, const lk_config *src) {
  char *text = NULL, *line = NULL, *tail = NULL;
  size_t len = 0;
  int rc = lk__config_text(run->cfg, &text, &len);
  if (rc == 0 && run->resumed) {
    line = history_line(run, src, run->opts.resume);
    tail = line ? lk__asprintf("\n%s\n", line) : NULL;
  }
  if (rc == 0 && run->resumed && !tail)
    rc = lk__err(LK_ENOMEM, "out of memory");
  if (rc == 0)
    rc = replace_config(run->rd.dir, text, len, tail ? tail : "");
  free(text);
  free(line);
  free(tail);
  return rc;
}

/* A run resumed in place: its config.ini becomes the config it goes on
 * with, when that is not what the file says already, or came from another
 * file, or a --set was given (recorded even when it changes nothing). The
 * file's history lines are kept and one is added. Not now: at the run's
 * first checkpoint (commit_config), the first file that depends on the
 * new config, so that a resume refused before it (a checkpoint that does
 * not fit the data, found at the first epoch) leaves config.ini as it was,
 * and the next resume goes on as if it never happened. */
static int update_config(lk_run *run, const lk_config *src) {
  const char *dir = run->rd.dir;
  char *path = lk__asprintf("%s/config.ini", dir);
  if (!path)
    return lk__err(LK_ENOMEM, "out of memory");
  struct stat a, b;
  bool own = lk__config_path(src) && stat(lk__config_path(src), &a) == 0 &&
             stat(path, &b) == 0 && same_file(&a, &b);
  char *text = NULL, *old = NULL, *hist = NULL, *line = NULL;
  size_t len = 0, old_len = 0, hist_len = 0;
  int rc = lk__config_text(run->cfg, &text, &len);
  if (rc == 0 && lk__read_file(path, "config", LK__CONFIG_MAX_BYTES, &old,
                               &old_len, NULL) != 0) {
    old = NULL; /* gone or unreadable: written whole */
    old_len = 0;
  }
  FILE *h = rc == 0 ? open_memstream(&hist, &hist_len) : NULL;
  if (rc == 0 && !h)
    rc = lk__err(LK_ENOMEM, "out of memory");
  bool keep = false;
  if (h) {
    fputc('\n', h); /* the history after a blank line */
    keep = old && same_body(old, old_len, text, h) && own &&
           lk__config_n_overrides(src) == 0;
    char *from = own ? NULL : lk__asprintf("config %s", lk__config_path(src));
    if (!keep && (own || from) && (line = history_line(run, src, from)))
      fprintf(h, "%s\n", line);
    free(from);
    if (fclose(h) != 0 || !hist || (!keep && !line))
      rc = lk__err(LK_ENOMEM, "out of memory");
  }
  if (rc == 0 && !keep) {
    run->rd.config_text = text;
    run->rd.config_len = len;
    run->rd.config_tail = hist;
    text = hist = NULL;
  }
  free(path);
  free(text);
  free(old);
  free(hist);
  free(line);
  return rc;
}

/* --out DIR is a directory, or nothing yet (it is made, with its parents).
 * As for every file loopkit writes, the path named is never a link (those
 * above it are followed): a link to a directory, another user's in /tmp,
 * would have the run's files written wherever it points. */
static int check_out_dir(const char *dir) {
  struct stat st;
  if (!strcmp(dir, "-"))
    return lk__err(LK_ECONFIG, "--out -: a run directory is a directory, not "
                               "the standard output");
  if (lstat(dir, &st) != 0 || S_ISDIR(st.st_mode))
    return 0; /* missing: made; unreachable: mkdir says why */
  if (S_ISLNK(st.st_mode)) {
    char to[512];
    ssize_t n = readlink(dir, to, sizeof to - 1);
    to[n > 0 ? (size_t)n : 0] = '\0';
    return lk__err(LK_ECONFIG,
                   "--out %s is a symbolic link (to %s): loopkit never writes "
                   "through a link; name the directory itself",
                   dir, n > 0 ? to : "?");
  }
  return lk__err(LK_ECONFIG,
                 "--out %s is %s, not a directory: refusing to write a run "
                 "there",
                 dir, lk__file_type(st.st_mode));
}

/* The config.ini a resume in place left to write, before the checkpoint
 * that first depends on it. */
static int commit_config(lk__rundir *rd) {
  if (!rd->config_text)
    return 0;
  int rc =
      replace_config(rd->dir, rd->config_text, rd->config_len, rd->config_tail);
  if (rc == 0) {
    free(rd->config_text);
    free(rd->config_tail);
    rd->config_text = rd->config_tail = NULL;
  }
  return rc;
}

int lk__rundir_open(lk_run *run, const lk_config *cfg,
                    const struct stat *ck_st) {
  lk__rundir *rd = &run->rd;
  const char *config_path = lk__config_path(cfg);
  char *src = NULL;
  int rc = run->opts.out_dir ? check_out_dir(run->opts.out_dir) : 0;
  if (rc != 0)
    return rc;
  if (run->resumed)
    rc = plan(run, config_path, ck_st, &src);
  else if (run->opts.out_dir)
    rc = (rd->dir = lk__strdup(run->opts.out_dir))
             ? 0
             : lk__err(LK_ENOMEM, "out of memory");
  else
    rc = new_run_dir(rd, config_path);
  if (rc == 0 && src)
    say_precision(run, cfg, src);
  if (rc == 0)
    rc = mkdir_p(rd->dir);
  if (rc == 0)
    rc = lock_dir(rd, rd->dir);
  /* Under the lock: what the directory holds cannot change any more. */
  if (rc == 0 && rd->in_place && !is_latest(rd->dir, ck_st))
    rc = lk__err(LK_ECONFIG,
                 "%s/checkpoints/last.ckpt changed while loopkit read %s (did "
                 "another loopkit just write it?): run the command again",
                 rd->dir, run->opts.resume);
  if (rc == 0 && !rd->in_place && holds_run(rd->dir))
    rc = lk__err(LK_ECONFIG,
                 "--out %s already holds a run (config.ini, metrics.csv or "
                 "checkpoints/): choose another directory; an earlier run's "
                 "files are never overwritten",
                 rd->dir);
  if (rc == 0 && !(rd->ckpt_dir = lk__asprintf("%s/checkpoints", rd->dir)))
    rc = lk__err(LK_ENOMEM, "out of memory");
  if (rc == 0 &&
      !(rd->last_ckpt = lk__asprintf("%s/checkpoints/last.ckpt", rd->dir)))
    rc = lk__err(LK_ENOMEM, "out of memory");
  if (rc == 0 && rd->in_place) {
    remove_leftovers(rd->dir, false);
    remove_leftovers(rd->ckpt_dir, true);
    rd->saved = true; /* its last.ckpt is the checkpoint resumed */
  }
  if (rc == 0)
    rc = check_checkpoints_dir(rd->ckpt_dir);
  if (rc == 0)
    rc = rd->in_place ? update_config(run, cfg) : write_config(run, cfg);
  if (rc == 0)
    rc = open_metrics(run, src);
  if (rc == 0 && run->resumed) {
    const lk__progress *p = &run->state.progress;
    if (rd->in_place)
      lk__log(&run->env, LK_LOG_INFO, "resuming %s at epoch %llu, step %llu",
              rd->dir, (unsigned long long)p->epoch,
              (unsigned long long)p->global_step);
    else
      lk__log(&run->env, LK_LOG_INFO,
              "%s is not the latest checkpoint of a run directory%s%s%s: "
              "resuming it at epoch %llu, step %llu in a new run directory, "
              "%s",
              run->opts.resume, src ? " (that of " : "", src ? src : "",
              src ? ")" : "", (unsigned long long)p->epoch,
              (unsigned long long)p->global_step, rd->dir);
  }
  /* For the loggers: where the rows before the checkpoint were logged. */
  if (rc == 0 && !rd->in_place)
    rd->source = src;
  else
    free(src);
  return rc;
}

void lk__rundir_close(lk__rundir *rd) {
  for (size_t i = 0; i < rd->n_pending; i++)
    free(rd->pending[i]);
  rd->n_pending = 0;
  if (rd->lock_fd >= 0)
    close(rd->lock_fd);
  rd->lock_fd = -1;
  free(rd->dir);
  free(rd->ckpt_dir);
  free(rd->last_ckpt);
  free(rd->source);
  free(rd->config_text);
  free(rd->config_tail);
  rd->dir = rd->ckpt_dir = rd->last_ckpt = rd->source = NULL;
  rd->config_text = rd->config_tail = NULL;
}

/* ---- writing checkpoints ------------------------------------------------ */

static int write_to(lk_run *run, const char *path) {
  const lk__tensors *ts = &run->env.tensors;
  if (run->rows.csv)
    run->state.metrics_rows = lk__metrics_rows(run->rows.csv);
  /* The loggers record where they are in their state, which this
   * checkpoint then carries with metrics.csv's row count. */
  int rc = lk__loggers_save(run);
  if (rc != 0)
    return rc;
  return lk__ckpt_write(path, &run->state, &run->env.rng, ts->params,
                        ts->n_params, ts->states, ts->n_states);
}

/* Whether NAME is one the loop writes with keep_last, step-N.ckpt (N as
 * %llu prints it), and N: only its own names are the loop's to prune. */
static bool step_number(const char *name, unsigned long long *n) {
  const char *digits = name + strlen("step-");
  if (strncmp(name, "step-", strlen("step-")) != 0 || *digits < '0' ||
      *digits > '9')
    return false;
  char *end;
  errno = 0;
  *n = strtoull(digits, &end, 10);
  char again[48];
  snprintf(again, sizeof again, "step-%llu.ckpt", *n);
  return errno == 0 && strcmp(end, ".ckpt") == 0 && strcmp(again, name) == 0;
}

static int cmp_u64(const void *a, const void *b) {
  unsigned long long x = *(const unsigned long long *)a,
                     y = *(const unsigned long long *)b;
  return (x > y) - (x < y);
}

/* Keeps the newest keep_last step-N.ckpt files. */
static int prune(lk_run *run) {
  const char *dir = run->rd.ckpt_dir;
  DIR *d = opendir(dir);
  if (!d)
    return lk__err(LK_EIO, "cannot list %s: %s", dir, strerror(errno));
  unsigned long long *steps = NULL, n;
  size_t count = 0, cap = 0;
  int rc = 0;
  struct dirent *e;
  while (rc == 0 && (e = readdir(d)))
    if (step_number(e->d_name, &n)) {
      if (count == cap) {
        size_t nc = cap ? 2 * cap : 16;
        unsigned long long *g = realloc(steps, nc * sizeof *g);
        if (!g) {
          rc = lk__err(LK_ENOMEM, "out of memory");
          break;
        }
        steps = g;
        cap = nc;
      }
      steps[count++] = n;
    }
  closedir(d);
  if (count)
    qsort(steps, count, sizeof *steps, cmp_u64);
  for (size_t i = 0; rc == 0 && i + (size_t)run->loop.keep_last < count; i++) {
    char *path = lk__asprintf("%s/step-%llu.ckpt", dir, steps[i]);
    if (!path || (unlink(path) != 0 && errno != ENOENT))
      rc = lk__err(LK_EIO, "cannot remove old checkpoint %s", path ? path : "");
    free(path);
  }
  free(steps);
  return rc;
}

/* last.ckpt, and with keep_last > 0 step-N.ckpt as well: the step file is
 * written atomically, then hard-linked into place as last.ckpt with a
 * rename, so both are always whole and cost one write. */
static int save(lk_run *run) {
  lk__rundir *rd = &run->rd;
  int rc = commit_config(rd);
  if (rc != 0)
    return rc;
  if (run->loop.keep_last == 0)
    return write_to(run, rd->last_ckpt);
  char *step =
      lk__asprintf("%s/step-%llu.ckpt", rd->ckpt_dir,
                   (unsigned long long)run->state.progress.global_step);
  rc = step ? 0 : lk__err(LK_ENOMEM, "out of memory");
  if (rc == 0)
    rc = write_to(run, step);
  if (rc == 0)
    rc = lk__output_link(step, rd->last_ckpt);
  if (rc == 0)
    rc = prune(run);
  free(step);
  return rc;
}

int lk__rundir_save(lk_run *run) {
  if (!run->rd.dir)
    return 0; /* rank 0 writes the run's checkpoints */
  int rc = save(run);
  if (rc != 0)
    return lk__err_prefix(rc, "checkpoint not written");
  run->rd.saved = true;
  return 0;
}

bool lk__rundir_has_last(const lk_run *run) {
  return !run->rd.dir || run->rd.saved;
}

/* Where a plugin's checkpoint FILE goes: DIR (absolute, or relative to the
 * run directory), or checkpoints/ without one. */
static char *request_path(const lk__rundir *rd, const char *dir,
                          const char *file) {
  if (!dir)
    return lk__asprintf("%s/%s", rd->ckpt_dir, file);
  if (dir[0] == '/')
    return lk__asprintf("%s/%s", dir, file);
  return lk__asprintf("%s/%s/%s", rd->dir, dir, file);
}

int lk__rundir_request(lk_run *run, const char *who, const char *dir,
                       const char *file) {
  lk__rundir *rd = &run->rd;
  if (!file || !*file || strchr(file, '/') || !strcmp(file, ".") ||
      !strcmp(file, "..") || !strcmp(file, "last.ckpt") ||
      !strcmp(file, "last.ckpt.link") || lk__output_is_temp(file))
    return lk__err(LK_EINVAL,
                   "plugin %s: checkpoint name \"%s\" is not a plain file "
                   "name other than last.ckpt",
                   who, file ? file : "(null)");
  if (dir && !*dir)
    return lk__err(LK_EINVAL, "plugin %s: checkpoint directory \"\" for %s",
                   who, file);
  if (run->env.rank != 0)
    return 0; /* rank 0 writes the run directory */
  if (!rd->dir)
    return lk__err(LK_ESTATE, "plugin %s: no run directory to save %s in", who,
                   file);
  char *path = request_path(rd, dir, file);
  if (!path)
    return lk__err(LK_ENOMEM, "out of memory");
  unsigned long long n;
  char *in = lk__strdup(path);
  bool loops =
      in && step_number(file, &n) && same_dir(dirname(in), rd->ckpt_dir);
  free(in);
  if (!in || loops) { /* the checkpoint callback refuses it at create */
    free(path);
    return !in ? lk__err(LK_ENOMEM, "out of memory")
               : lk__err(
                     LK_EINVAL,
                     "plugin %s: checkpoint name \"%s\" in %s is the loop's "
                     "(keep_last's step-N.ckpt, which it prunes)",
                     who, file, rd->ckpt_dir);
  }
  for (size_t i = 0; i < rd->n_pending; i++)
    if (!strcmp(rd->pending[i], path)) {
      free(path);
      return 0;
    }
  if (rd->n_pending == LK__MAX_PENDING) {
    free(path);
    return lk__err(LK_ESTATE,
                   "plugin %s: more than %d checkpoints asked for at once", who,
                   LK__MAX_PENDING);
  }
  rd->pending[rd->n_pending++] = path;
  return 0;
}

int lk__rundir_write_pending(lk_run *run) {
  lk__rundir *rd = &run->rd;
  int rc = commit_config(rd);
  for (size_t i = 0; i < rd->n_pending; i++) {
    /* Its directory, made now: a plugin's own (dirpath) may not exist. */
    char *dir = rc == 0 ? lk__strdup(rd->pending[i]) : NULL;
    if (rc == 0 && !dir)
      rc = lk__err(LK_ENOMEM, "out of memory");
    if (rc == 0 && strrchr(dir, '/') != dir)
      *strrchr(dir, '/') = '\0';
    if (rc == 0 && (rc = mkdir_p(dir)) == 0)
      rc = write_to(run, rd->pending[i]);
    if (rc != 0 && dir)
      rc = lk__err_prefix(rc, "checkpoint %s not written", rd->pending[i]);
    free(dir);
    free(rd->pending[i]);
  }
  rd->n_pending = 0;
  return rc;
}

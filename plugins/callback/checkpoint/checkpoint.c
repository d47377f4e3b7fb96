/* checkpoint: keeps the save_top_k best checkpoints by a monitored metric,
 * as Lightning's ModelCheckpoint, named as it names them: filename is its
 * pattern (ckpt_name.h), by default {epoch}-{step}, which gives
 * epoch=E-step=S.ckpt (E the 0-based epoch, S the optimizer steps taken),
 * in dirpath (absolute, or relative to the run directory), by default
 * RUN_DIR/checkpoints, or RUN_DIR/checkpoints/NAME for an instance named
 * NAME:checkpoint, so that two checkpoint callbacks (two monitors) never
 * write, link or delete each other's files; the loop itself writes
 * last.ckpt. A value is kept
 * when fewer than save_top_k are, or when it is strictly better than the
 * worst kept one, which is then deleted (after the new file is written, so
 * that a crash leaves one file too many, never one too few). Non-finite
 * values are never kept. save_top_k = -1 keeps every checked value; 0
 * keeps none.
 *
 * best.ckpt is the best so far, written beside its epoch=E-step=S.ckpt at
 * the same moment (the loop writes both where its state is whole: after
 * the epoch's validation and scheduler step), so the two are identical.
 *
 * The kept list (score, epoch, step), best first, is host state, so a
 * resumed run goes on from it and deletes the files an earlier process
 * wrote; files another run directory holds are not there to delete. With
 * save_top_k = -1 nothing is ever deleted, so only the best is tracked. */
#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#include "bundled.h"
#include "ckpt_carry.h"
#include "ckpt_clash.h"
#include "ckpt_name.h"
#include "monitor.h"

/* A kept row: the score, epoch and step, then the filename's metrics. */
enum { SCORE, EPOCH, STEP, N_FIELDS };

typedef struct entry {
  double score;
  uint64_t epoch, step;
  double values[CKPT_NAME_METRICS];
} entry;

typedef struct checkpoint {
  monitor m; /* first: monitor_on_validation_end and the like find it */
  lk_host *host;
  int64_t top_k;     /* -1: every one, 0: none */
  size_t cap;        /* rows of kept */
  ckpt_name name;    /* the filename pattern */
  char *dir;         /* dirpath as the host takes it; NULL: checkpoints */
  size_t n_fields;   /* N_FIELDS and the filename's metrics */
  lk_tensor *kept;   /* f64[cap, n_fields], best first */
  lk_tensor *n_kept; /* f64[1] */
  lk_tensor *checks; /* f64[1]: checks made, for the warning at the end */
} checkpoint;

/* The monitor's check (monitor.h), below. */
static int check(void *self, const lk_step_result *val);

static void destroy(void *self) {
  checkpoint *s = self;
  monitor_free(&s->m);
  free(s->dir);
  free(s);
}

static int add_state(checkpoint *s, lk_host *host) {
  size_t one = 1, shape[2] = {s->cap, s->n_fields};
  int rc = lk_host_add_state(host, "kept", LK_F64, 2, shape, &s->kept);
  if (rc == 0)
    rc = lk_host_add_state(host, "n_kept", LK_F64, 1, &one, &s->n_kept);
  if (rc == 0)
    rc = lk_host_add_state(host, "checks", LK_F64, 1, &one, &s->checks);
  return rc;
}

/* dirpath, or the default: checkpoints/, or checkpoints/NAME when the
 * instance has a name of its own. */
static int set_dir(checkpoint *s, lk_host *host, const char *dirpath) {
  const char *name = lk_host_name(host);
  char *dir = NULL;
  if (dirpath && *dirpath) {
    dir = malloc(strlen(dirpath) + 1);
    if (dir)
      strcpy(dir, dirpath);
  } else if (strcmp(name, "checkpoint") != 0) {
    dir = malloc(strlen(name) + sizeof "checkpoints/");
    if (dir)
      snprintf(dir, strlen(name) + sizeof "checkpoints/", "checkpoints/%s",
               name);
  } else
    return 0;
  if (!dir)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  s->dir = dir;
  return 0;
}

/* Whether DIR (dirpath as given; NULL: the default) is the directory the
 * loop writes its own checkpoints in: "checkpoints" relative to the run
 * directory, however spelt ("./checkpoints/"). */
static bool loop_dir(const char *dir) {
  if (!dir)
    return true;
  while (dir[0] == '.' && dir[1] == '/')
    for (dir += 2; *dir == '/';)
      dir++;
  size_t n = strlen("checkpoints");
  if (strncmp(dir, "checkpoints", n) != 0)
    return false;
  while (dir[n] == '/')
    n++;
  return dir[n] == '\0';
}

static int create(lk_host *host, const lk_options *o, void **self) {
  int64_t top_k = lk_opt_int(o, "save_top_k");
  checkpoint *s = calloc(1, sizeof *s);
  if (!s)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  s->host = host;
  s->top_k = top_k;
  s->cap = top_k > 0 ? (size_t)top_k : 1;
  int rc = monitor_init(&s->m, host, o, check);
  if (rc == 0)
    rc = ckpt_name_parse(&s->name, host, lk_opt_string(o, "filename"),
                         lk_opt_bool(o, "auto_insert_metric_name"));
  s->n_fields = N_FIELDS + s->name.n_metrics;
  if (rc == 0)
    rc = set_dir(s, host, lk_opt_string(o, "dirpath"));
  if (rc == 0)
    rc = ckpt_clash_check(&s->name, host, lk_opt_string(o, "filename"),
                          loop_dir(s->dir));
  /* What it keeps, and where, for the host's checks and the test on
   * best.ckpt ([loop] test_ckpt = best). */
  if (rc == 0)
    rc = lk_host_keep_checkpoints(host, s->dir, top_k != 0);
  if (rc == 0)
    rc = add_state(s, host);
  if (rc != 0) {
    destroy(s);
    return rc;
  }
  *self = s;
  return 0;
}

static size_t count(const checkpoint *s) {
  double n = *(const double *)s->n_kept->data;
  return (size_t)n;
}

static entry get(const checkpoint *s, size_t i) {
  const double *row = (const double *)s->kept->data + i * s->n_fields;
  entry e = {row[SCORE], (uint64_t)row[EPOCH], (uint64_t)row[STEP], {0}};
  for (size_t m = 0; m < s->name.n_metrics; m++)
    e.values[m] = row[N_FIELDS + m];
  return e;
}

static void put(checkpoint *s, size_t i, entry e) {
  double *row = (double *)s->kept->data + i * s->n_fields;
  row[SCORE] = e.score;
  row[EPOCH] = (double)e.epoch;
  row[STEP] = (double)e.step;
  for (size_t m = 0; m < s->name.n_metrics; m++)
    row[N_FIELDS + m] = e.values[m];
}

/* E's file name; a failure when the pattern makes it longer than a file
 * name may be. */
static int file_name(const checkpoint *s, char *buf, size_t len, entry e) {
  if (ckpt_name_render(&s->name, e.epoch, e.step, e.values, buf, len) &&
      strcmp(buf, "best.ckpt") != 0 && strcmp(buf, "last.ckpt") != 0)
    return 0;
  return lk_fail(s->host, LK_ECONFIG,
                 "option filename: the name for epoch %llu, step %llu is "
                 "longer than %zu bytes, or is best.ckpt or last.ckpt",
                 (unsigned long long)e.epoch, (unsigned long long)e.step,
                 len - 1);
}

/* The filename's metric fields, at the point where E is checked. */
static int read_values(checkpoint *s, entry *e) {
  for (size_t m = 0; m < s->name.n_metrics; m++)
    if (lk_host_metric(s->host, s->name.metrics[m], &e->values[m]) != 0)
      return lk_fail(s->host, LK_ECONFIG,
                     "option filename: field {%s} was never logged: name "
                     "epoch, step or a metrics.csv column",
                     s->name.metrics[m]);
  return 0;
}

static int save(checkpoint *s, const char *file) {
  return s->dir ? lk_host_save_checkpoint_in(s->host, s->dir, file)
                : lk_host_save_checkpoint(s->host, file);
}

/* Strictly better: a tie keeps the older file, as Lightning does. */
static bool better(const checkpoint *s, double a, double b) {
  return s->m.max ? a > b : a < b;
}

/* Where E goes in the list (best first), or cap when it is not kept. */
static size_t position(const checkpoint *s, entry e) {
  size_t n = count(s), i = 0;
  while (i < n && !better(s, e.score, get(s, i).score))
    i++;
  if (s->top_k == -1) /* only the best is tracked; every file stays */
    return i == 0 ? 0 : s->cap;
  return i < s->cap ? i : s->cap;
}

/* Inserts E at POS; *EVICTED gets the entry that fell out of the list. */
static bool insert(checkpoint *s, size_t pos, entry e, entry *evicted) {
  size_t n = count(s);
  bool full = n == s->cap;
  if (full) {
    *evicted = get(s, n - 1);
    n--;
  }
  for (size_t i = n; i > pos; i--)
    put(s, i, get(s, i - 1));
  put(s, pos, e);
  *(double *)s->n_kept->data = (double)(n + 1);
  return full && s->top_k != -1;
}

static int remove_file(checkpoint *s, const char *name) {
  const char *run_dir = lk_host_run_dir(s->host);
  if (!run_dir)
    return 0; /* ranks other than 0 write nothing */
  /* Where the host wrote it: dirpath absolute, or in the run directory. */
  const char *dir = s->dir ? s->dir : "checkpoints";
  const char *base = dir[0] == '/' ? "" : run_dir;
  size_t len = strlen(base) + strlen(dir) + strlen(name) + 3;
  char *path = malloc(len);
  if (!path)
    return lk_fail(s->host, LK_ENOMEM, "out of memory");
  snprintf(path, len, "%s%s%s/%s", base, *base ? "/" : "", dir, name);
  int rc = 0;
  if (unlink(path) == 0)
    lk_log(s->host, LK_LOG_DEBUG, "removed %s (no longer in the top %lld)",
           name, (long long)s->top_k);
  else if (errno != ENOENT) /* ENOENT: resumed in another run directory */
    rc =
        lk_fail(s->host, LK_EIO, "cannot remove %s: %s", path, strerror(errno));
  free(path);
  return rc;
}

static int keep(checkpoint *s, entry e) {
  for (size_t i = 0; i < count(s); i++)
    if (get(s, i).epoch == e.epoch && get(s, i).step == e.step)
      return 0; /* kept already: a run resumed from this very file */
  size_t pos = position(s, e);
  if (pos == s->cap && s->top_k != -1)
    return 0;
  char name[256], old[256];
  int rc = file_name(s, name, sizeof name, e);
  if (rc != 0)
    return rc;
  entry evicted = {0, 0, 0, {0}};
  bool evict = pos < s->cap && insert(s, pos, e, &evicted);
  /* After the list changed: the file holds the list it is in. */
  rc = save(s, name);
  /* A pattern without epoch or step names the new file as the old one. */
  if (rc == 0 && evict && (rc = file_name(s, old, sizeof old, evicted)) == 0 &&
      strcmp(old, name) != 0)
    rc = remove_file(s, old);
  if (rc == 0 && pos == 0) {
    lk_log(s->host, LK_LOG_INFO, "new best %s %.6g at epoch %llu: %s%s%s",
           s->m.name, e.score, (unsigned long long)e.epoch,
           s->dir ? s->dir : "", s->dir ? "/" : "", name);
    rc = save(s, "best.ckpt");
  }
  return rc;
}

static int check(void *self, const lk_step_result *val) {
  checkpoint *s = self;
  if (s->top_k == 0)
    return 0;
  entry e = {0, 0, 0, {0}};
  int rc = monitor_read(&s->m, s->host, val, &e.score);
  if (rc != 0)
    return rc;
  *(double *)s->checks->data += 1;
  lk_host_progress(s->host, &e.epoch, &e.step);
  if ((rc = read_values(s, &e)) != 0)
    return rc;
  if (!isfinite(e.score)) {
    lk_log(s->host, LK_LOG_INFO, "%s = %g at epoch %llu: not kept", s->m.name,
           e.score, (unsigned long long)e.epoch);
    return 0;
  }
  return keep(s, e);
}

/* A checkpoint's values: the kept count indexes the table, and each kept
 * entry's epoch and step name a file. */
static int check_state(void *self) {
  checkpoint *s = self;
  int rc = lk_state_check(s->host, s->n_kept, 0, (double)s->cap, true);
  if (rc == 0)
    rc = lk_state_check(s->host, s->checks, 0, LK_STATE_MAX_COUNT, true);
  const double *kept = s->kept->data;
  for (size_t i = 0; rc == 0 && i < count(s); i++)
    for (int f = EPOCH; rc == 0 && f <= STEP; f++) {
      double v = kept[i * s->n_fields + f];
      if (!(v >= 0 && v <= LK_STATE_MAX_COUNT && v == floor(v)))
        rc = lk_fail(s->host, LK_EFORMAT,
                     "state %s: kept entry %zu has %s %.17g: expected a whole "
                     "number in [0, 2^53]",
                     s->kept->name, i, f == EPOCH ? "epoch" : "step", v);
    }
  return rc;
}

/* DIR/SUB/NAME, or NULL when out of memory. */
static char *join3(const char *dir, const char *sub, const char *name) {
  size_t len = strlen(dir) + strlen(sub) + strlen(name) + 3;
  char *p = malloc(len);
  if (p)
    snprintf(p, len, "%s/%s/%s", dir, sub, name);
  return p;
}

/* The file of kept entry I (best.ckpt with BEST) carried from FROM's
 * directory into this run's: said when it cannot be. */
static int carry(checkpoint *s, const char *from, size_t i, bool best) {
  const char *sub = s->dir ? s->dir : "checkpoints";
  char name[256];
  int rc = file_name(s, name, sizeof name, get(s, i));
  char *src = rc == 0 ? join3(from, sub, name) : NULL;
  char *dst =
      rc == 0 ? join3(lk_host_run_dir(s->host), sub, best ? "best.ckpt" : name)
              : NULL;
  if (rc == 0 && (!src || !dst))
    rc = lk_fail(s->host, LK_ENOMEM, "out of memory");
  int e = rc == 0 ? carry_file(src, dst) : 0;
  if (e == ENOMEM)
    rc = lk_fail(s->host, LK_ENOMEM, "out of memory");
  else if (e)
    lk_log(s->host, LK_LOG_WARN,
           "kept checkpoint %s of the run this one continues is not carried "
           "to %s (%s)%s",
           src, dst, strerror(e),
           best ? ": this run has no best.ckpt until a better one comes" : "");
  free(src);
  free(dst);
  return rc;
}

/* A run resumed in a new run directory goes on with the kept list of the
 * run it continues, whose files are in that run's directory: each is
 * carried here, and best.ckpt made the best one's (that run's best.ckpt
 * may be from later than the checkpoint resumed), so that this directory
 * holds what its state says it keeps: the test on best.ckpt, an eviction
 * and a resume of this run find them here. A dirpath given absolute is
 * the same directory for both. */
static int on_train_start(void *self) {
  checkpoint *s = self;
  const char *from = lk_host_previous_run_dir(s->host);
  if (!from || !lk_host_run_dir(s->host) || (s->dir && s->dir[0] == '/'))
    return 0;
  int rc = 0;
  for (size_t i = 0; i < count(s) && rc == 0; i++)
    rc = carry(s, from, i, false);
  return rc == 0 && count(s) > 0 ? carry(s, from, 0, true) : rc;
}

static int on_train_end(void *self) {
  checkpoint *s = self;
  if (s->top_k != 0)
    monitor_warn_unchecked(&s->m, s->host, *(double *)s->checks->data > 0);
  return 0;
}

static const lk_option options[] = {
    MONITOR_OPTIONS,
    {"save_top_k", LK_OPT_INT, "1",
     "how many of the best checkpoints to keep: K >= 1 (at most 100000), -1 "
     "every one, 0 none",
     "[-1, 100000]"},
    {"filename", LK_OPT_STRING, "{epoch}-{step}",
     "the kept files' names, .ckpt appended: text and fields {epoch}, {step} "
     "or a metric ({val_loss:.4f}; formats [0][WIDTH][.PREC] then d for "
     "epoch and step, f, e or g for a metric, default g), each written "
     "NAME=VALUE",
     NULL},
    {"dirpath", LK_OPT_STRING, "",
     "the directory of the kept files and best.ckpt: absolute, or relative "
     "to the run directory (default: checkpoints, or checkpoints/NAME for an "
     "instance named NAME:checkpoint)",
     NULL},
    {"auto_insert_metric_name", LK_OPT_BOOL, "true",
     "write each filename field as NAME=VALUE (false: the value alone)", NULL},
    {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor =
    BUNDLED_CALLBACK("checkpoint",
                     "keeps the best checkpoints by a monitored metric and "
                     "best.ckpt, as Lightning's ModelCheckpoint",
                     destroy, check_state, .on_train_start = on_train_start,
                     .on_validation_end = monitor_on_validation_end,
                     .on_train_epoch_end = monitor_on_train_epoch_end,
                     .on_train_end = on_train_end);

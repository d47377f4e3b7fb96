/* tensorboard: a logger that writes the run's rows as TensorBoard reads
 * them, in RUN_DIR/events.out.tfevents.<time>.<host> (<time> the seconds
 * since the epoch when the file was begun, <host> this machine's name), or
 * in RUN_DIR/<sub_dir>: `tensorboard --logdir runs/` then shows every run
 * directory as a run.
 *
 * The file is a sequence of TFRecords (tfrecord.h) of Event protocol
 * buffers (tensorboard/compat/proto/event.proto): first one that holds
 * only file_version = "brain.Event:2"; then, each time a training session
 * starts, the run's effective config as a text summary (tag
 * config/text_summary, TensorBoard's text plugin, as torch's add_text
 * writes it) at the step the session starts from; then one event per
 * metrics.csv row at the row's step, whose summary holds one scalar
 * (simple_value, a float) per cell of the row, tagged with its column's
 * name (loss, lr, val_loss, ...).
 *
 * Events are buffered, as torch's SummaryWriter buffers them, and written
 * when max_queue of them are waiting, when flush_secs have passed since
 * the last write, at every checkpoint and at the end. At a checkpoint the
 * file is also synced, and its length and <time> go into this logger's
 * state, which the checkpoint carries: a run resumed in place cuts the
 * file back to that length (the rows a killed run logged after its last
 * checkpoint are logged again, as metrics.csv's are) and appends; a run
 * resumed in a new run directory begins its file with that many bytes of
 * the source run's, so the new directory holds the whole run too. Each
 * step is in the file once. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <loopkit/loopkit.h>

#include "bundled.h"
#include "tfrecord.h"

#define FILE_PREFIX "events.out.tfevents."
#define FILE_VERSION "brain.Event:2"
#define CONFIG_TAG "config/text_summary"

/* tensorboard's proto field numbers (event.proto, summary.proto,
 * tensor.proto, tensor_shape.proto, types.proto). */
enum {
  EVENT_WALL_TIME = 1,
  EVENT_STEP = 2,
  EVENT_FILE_VERSION = 3,
  EVENT_SUMMARY = 5,
  SUMMARY_VALUE = 1,
  VALUE_TAG = 1,
  VALUE_SIMPLE_VALUE = 2,
  VALUE_TENSOR = 8,
  VALUE_METADATA = 9,
  METADATA_PLUGIN_DATA = 1,
  PLUGIN_DATA_PLUGIN_NAME = 1,
  TENSOR_DTYPE = 1,
  TENSOR_SHAPE = 2,
  TENSOR_STRING_VAL = 8,
  SHAPE_DIM = 2,
  DIM_SIZE = 1,
  DT_STRING = 7
};

typedef struct tb {
  lk_host *host;
  const char *sub_dir; /* the option's value: valid until destroy */
  double flush_secs;
  int64_t max_queue;
  lk_tensor *created; /* state: <time> of the file's name; 0: no file yet */
  lk_tensor *offset;  /* state: the file's length at the last checkpoint */
  char *path;         /* the event file */
  int fd;             /* -1: not open */
  uint64_t size;      /* the file's length: bytes written */
  pb_buf queue;       /* records not written yet */
  int64_t queued;
  double last_flush; /* CLOCK_MONOTONIC seconds */
} tb;

static double now(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double *state(lk_tensor *t) {
  return t->data;
}

/* ---- writing ------------------------------------------------------------- */

/* The queued records, written to the file. */
static int flush(tb *t) {
  size_t at = 0;
  if (t->queue.oom)
    return lk_fail(t->host, LK_ENOMEM, "out of memory for %s's events",
                   t->path);
  while (at < t->queue.n) {
    ssize_t w = write(t->fd, t->queue.p + at, t->queue.n - at);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return lk_fail(t->host, LK_EIO, "cannot write %s: %s", t->path,
                     w < 0 ? strerror(errno) : "nothing written");
    at += (size_t)w;
  }
  t->size += t->queue.n;
  t->queue.n = 0;
  t->queued = 0;
  t->last_flush = now(CLOCK_MONOTONIC);
  return 0;
}

/* EVENT (its wall time and step added here) as a record of the queue,
 * written when the queue is full or the last write is flush_secs old. */
static int put_event(tb *t, uint64_t step, const pb_buf *what) {
  pb_buf ev = {0};
  pb_double(&ev, EVENT_WALL_TIME, now(CLOCK_REALTIME));
  if (step)
    pb_int64(&ev, EVENT_STEP, (int64_t)step);
  pb_append(&ev, what->p, what->n); /* the event's oneof, encoded */
  if (what->oom)
    ev.oom = true;
  tfrecord_append(&t->queue, ev.p, ev.n);
  if (ev.oom)
    t->queue.oom = true;
  pb_free(&ev);
  t->queued++;
  if (t->queued >= t->max_queue ||
      now(CLOCK_MONOTONIC) - t->last_flush >= t->flush_secs)
    return flush(t);
  return 0;
}

static int put_file_version(tb *t) {
  pb_buf what = {0};
  pb_string(&what, EVENT_FILE_VERSION, FILE_VERSION);
  int rc = put_event(t, 0, &what);
  pb_free(&what);
  return rc;
}

/* The config as a text summary. TensorBoard renders text as Markdown:
 * indented four spaces, the INI file is a code block, shown as it is. */
static int put_config(tb *t, uint64_t step, const char *config) {
  pb_buf text = {0}, shape = {0}, dim = {0}, tensor = {0}, plugin = {0},
         meta = {0}, value = {0}, summary = {0}, what = {0};
  for (const char *line = config; *line;) {
    size_t n = strcspn(line, "\n");
    if (n)
      pb_append(&text, "    ", 4);
    pb_append(&text, line, n);
    pb_append(&text, "\n", 1);
    line += n + (line[n] == '\n');
  }
  pb_int64(&dim, DIM_SIZE, 1);
  pb_message(&shape, SHAPE_DIM, &dim);
  pb_int64(&tensor, TENSOR_DTYPE, DT_STRING);
  pb_message(&tensor, TENSOR_SHAPE, &shape);
  pb_bytes(&tensor, TENSOR_STRING_VAL, text.p, text.n);
  if (text.oom)
    tensor.oom = true;
  pb_string(&plugin, PLUGIN_DATA_PLUGIN_NAME, "text");
  pb_message(&meta, METADATA_PLUGIN_DATA, &plugin);
  pb_string(&value, VALUE_TAG, CONFIG_TAG);
  pb_message(&value, VALUE_METADATA, &meta);
  pb_message(&value, VALUE_TENSOR, &tensor);
  pb_message(&summary, SUMMARY_VALUE, &value);
  pb_message(&what, EVENT_SUMMARY, &summary);
  int rc = put_event(t, step, &what);
  pb_buf *all[] = {&text, &shape, &dim,     &tensor, &plugin,
                   &meta, &value, &summary, &what};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    pb_free(all[i]);
  return rc;
}

/* ---- the file ----------------------------------------------------------- */

static int mkdirs(tb *t, const char *path) {
  char *copy = strdup(path);
  if (!copy)
    return lk_fail(t->host, LK_ENOMEM, "out of memory");
  int rc = 0;
  for (char *p = copy + 1; rc == 0; p++) {
    if (*p && *p != '/')
      continue;
    char c = *p;
    *p = '\0';
    if (mkdir(copy, 0777) != 0 && errno != EEXIST)
      rc = lk_fail(t->host, LK_EIO, "cannot create directory %s: %s", copy,
                   strerror(errno));
    *p = c;
    if (!c)
      break;
  }
  free(copy);
  return rc;
}

/* DIR's event file begun at CREATED: this host's name for it if it is
 * there, else the one file of DIR whose name starts with that time (the
 * run may have moved to another host). NULL when there is none, or
 * several. */
static char *find_file(const char *dir, long long created) {
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  char *mine = NULL, *found = NULL, prefix[64];
  snprintf(prefix, sizeof prefix, FILE_PREFIX "%lld.", created);
  if (asprintf(&mine, "%s/%s%s", dir, prefix, host) < 0)
    return NULL;
  if (access(mine, F_OK) == 0)
    return mine;
  free(mine);
  DIR *d = opendir(dir);
  int matches = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (!strncmp(e->d_name, prefix, strlen(prefix)) && matches++ == 0 &&
        asprintf(&found, "%s/%s", dir, e->d_name) < 0)
      found = NULL;
  if (d)
    closedir(d);
  if (matches != 1) {
    free(found);
    return NULL;
  }
  return found;
}

/* Any event file in DIR (its name into NAME): a new file there would be
 * read by TensorBoard as the same run. */
static bool holds_events(const char *dir, char *name, size_t len) {
  DIR *d = opendir(dir);
  struct dirent *e;
  bool yes = false;
  while (d && !yes && (e = readdir(d)))
    if (!strncmp(e->d_name, FILE_PREFIX, strlen(FILE_PREFIX))) {
      snprintf(name, len, "%s", e->d_name);
      yes = true;
    }
  if (d)
    closedir(d);
  return yes;
}

/* A new event file in DIR, begun now, with its file_version event. */
static int begin_file(tb *t, const char *dir) {
  char other[256];
  if (holds_events(dir, other, sizeof other))
    return lk_fail(t->host, LK_ECONFIG,
                   "%s already holds an event file, %s (another tensorboard "
                   "logger's?): TensorBoard would read both as one run; give "
                   "each tensorboard logger its own sub_dir",
                   dir, other);
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  long long created = (long long)time(NULL);
  free(t->path);
  if (asprintf(&t->path, "%s/" FILE_PREFIX "%lld.%s", dir, created, host) < 0) {
    t->path = NULL;
    return lk_fail(t->host, LK_ENOMEM, "out of memory");
  }
  t->fd =
      open(t->path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
  if (t->fd < 0)
    return lk_fail(t->host, LK_EIO, "cannot create %s: %s", t->path,
                   strerror(errno));
  t->size = 0;
  state(t->created)[0] = (double)created;
  state(t->offset)[0] = 0;
  return put_file_version(t);
}

/* The first LEN bytes of PATH, read whole into *OUT; false when the file
 * is not there, shorter, or not whole records up to LEN. */
static bool read_prefix(const char *path, uint64_t len, uint8_t **out) {
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0)
    return false;
  uint8_t *buf = NULL;
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
            (uint64_t)st.st_size >= len && len <= SIZE_MAX &&
            (buf = malloc(len ? (size_t)len : 1)) != NULL;
  for (size_t at = 0; ok && at < len;) {
    ssize_t r = pread(fd, buf + at, (size_t)len - at, (off_t)at);
    if (r < 0 && errno == EINTR)
      continue;
    ok = r > 0;
    at += ok ? (size_t)r : 0;
  }
  close(fd);
  ok = ok && tfrecord_valid(buf, (size_t)len);
  if (!ok) {
    free(buf);
    return false;
  }
  *out = buf;
  return true;
}

/* A run resumed in place: its file, cut back to the checkpoint's length.
 * A file that is gone starts anew; one that is shorter, or broken before
 * that length, is not this run's file as the checkpoint knew it: refused,
 * as metrics.csv is, rather than continued with a hole. */
static int continue_file(tb *t, const char *dir) {
  long long created = (long long)state(t->created)[0];
  uint64_t offset = (uint64_t)state(t->offset)[0];
  char *path = find_file(dir, created);
  if (!path) {
    lk_log(t->host, LK_LOG_WARN,
           "%s holds no event file begun at %lld, which the checkpoint's "
           "rows went to: a new one begins at this step",
           dir, created);
    return begin_file(t, dir);
  }
  uint8_t *prefix;
  bool whole = read_prefix(path, offset, &prefix);
  free(prefix);
  if (!whole) {
    int rc = lk_fail(t->host, LK_EFORMAT,
                     "%s is shorter than the %llu bytes it had at the "
                     "checkpoint, or not whole TFRecords up to there: not "
                     "this run's event file, or it was cut; move it away to "
                     "begin a new one",
                     path, (unsigned long long)offset);
    free(path);
    return rc;
  }
  free(t->path);
  t->path = path;
  /* Never cut through a link (what it points to is not this run's). */
  t->fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
  if (t->fd < 0 || ftruncate(t->fd, (off_t)offset) != 0)
    return lk_fail(t->host, LK_EIO, "cannot cut %s back to %llu bytes: %s",
                   path, (unsigned long long)offset, strerror(errno));
  t->size = offset;
  return 0;
}

/* A run resumed in a new run directory: its file begins with the source
 * run's, up to the checkpoint. When that is not at hand, a new file
 * begins at this step (so does metrics.csv, then). */
static int copy_file(tb *t, const char *dir, const char *from) {
  long long created = (long long)state(t->created)[0];
  uint64_t offset = (uint64_t)state(t->offset)[0];
  char *src_dir = NULL, *src = NULL;
  if (!from)
    return begin_file(t, dir); /* the checkpoint is not a run directory's */
  if (*t->sub_dir ? asprintf(&src_dir, "%s/%s", from, t->sub_dir) < 0
                  : !(src_dir = strdup(from)))
    return lk_fail(t->host, LK_ENOMEM, "out of memory");
  src = find_file(src_dir, created);
  uint8_t *prefix = NULL;
  if (!src || !read_prefix(src, offset, &prefix)) {
    lk_log(t->host, LK_LOG_INFO,
           "%s: no event file begun at %lld with the %llu bytes the "
           "checkpoint's rows took: the new event file begins at this step",
           src_dir, created, (unsigned long long)offset);
    free(src_dir);
    free(src);
    return begin_file(t, dir);
  }
  free(t->path);
  const char *base = strrchr(src, '/') + 1;
  int rc = 0;
  if (asprintf(&t->path, "%s/%s", dir, base) < 0) {
    t->path = NULL;
    rc = lk_fail(t->host, LK_ENOMEM, "out of memory");
  }
  if (rc == 0) {
    t->fd =
        open(t->path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (t->fd < 0)
      rc = lk_fail(t->host, LK_EIO, "cannot create %s: %s", t->path,
                   strerror(errno));
  }
  pb_buf copy = {.p = prefix, .n = (size_t)offset, .cap = (size_t)offset};
  if (rc == 0) {
    t->queue = copy; /* written by the next flush */
    t->queued = 1;
    prefix = NULL;
    rc = flush(t);
    t->size = offset;
    lk_log(t->host, LK_LOG_INFO, "%s begins with the %llu bytes of %s", t->path,
           (unsigned long long)offset, src);
  }
  free(prefix);
  free(src_dir);
  free(src);
  return rc;
}

/* ---- the logger --------------------------------------------------------- */

static int start(void *self, const lk_logger_start *run) {
  tb *t = self;
  char *dir = NULL;
  if (*t->sub_dir ? asprintf(&dir, "%s/%s", run->run_dir, t->sub_dir) < 0
                  : !(dir = strdup(run->run_dir)))
    return lk_fail(t->host, LK_ENOMEM, "out of memory");
  int rc = mkdirs(t, dir);
  t->last_flush = now(CLOCK_MONOTONIC);
  if (rc == 0 && run->resumed && state(t->created)[0] > 0 &&
      state(t->offset)[0] > 0)
    rc = run->in_place ? continue_file(t, dir)
                       : copy_file(t, dir, run->resumed_from);
  else if (rc == 0)
    rc = begin_file(t, dir);
  free(dir);
  if (rc == 0)
    rc = put_config(t, run->step, run->config);
  return rc;
}

static int log_metrics(void *self, uint64_t step, uint64_t epoch,
                       const lk_metric *metrics, size_t n) {
  tb *t = self;
  (void)epoch;
  pb_buf value = {0}, summary = {0}, what = {0};
  for (size_t i = 0; i < n; i++) {
    value.n = 0;
    pb_string(&value, VALUE_TAG, metrics[i].name);
    pb_float(&value, VALUE_SIMPLE_VALUE, (float)metrics[i].value);
    pb_message(&summary, SUMMARY_VALUE, &value);
  }
  pb_message(&what, EVENT_SUMMARY, &summary);
  int rc = put_event(t, step, &what);
  pb_free(&value);
  pb_free(&summary);
  pb_free(&what);
  return rc;
}

/* Before a checkpoint: every event so far on disk, and the file's length
 * in the state the checkpoint takes. */
static int save(void *self) {
  tb *t = self;
  int rc = flush(t);
  if (rc == 0 && fdatasync(t->fd) != 0)
    rc = lk_fail(t->host, LK_EIO, "cannot sync %s: %s", t->path,
                 strerror(errno));
  if (rc == 0)
    state(t->offset)[0] = (double)t->size;
  return rc;
}

static int finalize(void *self, const char *status) {
  tb *t = self;
  (void)status;
  int rc = t->fd >= 0 ? flush(t) : 0;
  if (t->fd >= 0 && close(t->fd) != 0 && rc == 0)
    rc = lk_fail(t->host, LK_EIO, "cannot write %s: %s", t->path,
                 strerror(errno));
  t->fd = -1;
  return rc;
}

/* ---- the plugin --------------------------------------------------------- */

static void destroy(void *self) {
  tb *t = self;
  if (t->fd >= 0)
    close(t->fd);
  pb_free(&t->queue);
  free(t->path);
  free(t);
}

/* sub_dir is a directory of the run directory's own. */
static bool relative_below(const char *p) {
  if (*p == '/')
    return false;
  for (const char *s = p; *s;) {
    size_t n = strcspn(s, "/");
    if (n == 2 && !strncmp(s, "..", 2))
      return false;
    s += n + (s[n] == '/');
  }
  return true;
}

static int create(lk_host *host, const lk_options *opts, void **self) {
  const char *sub_dir = lk_opt_string(opts, "sub_dir");
  if (!relative_below(sub_dir))
    return lk_fail(host, LK_ECONFIG,
                   "option sub_dir = \"%s\": must be a directory inside the "
                   "run directory (relative, without ..)",
                   sub_dir);
  tb *t = calloc(1, sizeof *t);
  if (!t)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  t->host = host;
  t->fd = -1;
  t->sub_dir = sub_dir;
  t->flush_secs = (double)lk_opt_int(opts, "flush_secs");
  t->max_queue = lk_opt_int(opts, "max_queue");
  size_t one = 1;
  int rc = lk_host_add_state(host, "created", LK_F64, 1, &one, &t->created);
  if (rc == 0)
    rc = lk_host_add_state(host, "offset", LK_F64, 1, &one, &t->offset);
  if (rc != 0) {
    destroy(t);
    return rc;
  }
  *self = t;
  return 0;
}

/* The file's time and length, as a checkpoint gives them back. */
static int check_state(void *self) {
  tb *t = self;
  int rc = lk_state_check(t->host, t->created, 0, LK_STATE_MAX_COUNT, true);
  return rc ? rc
            : lk_state_check(t->host, t->offset, 0, LK_STATE_MAX_COUNT, true);
}

static const lk_option options[] = {
    {"sub_dir", LK_OPT_STRING, "",
     "the directory of the event file, inside the run directory (empty: the "
     "run directory itself)",
     NULL},
    {"flush_secs", LK_OPT_INT, "120",
     "seconds between writes of the buffered events (torch's SummaryWriter "
     "flush_secs); they are also written at every checkpoint and at the end",
     "[0, 86400]"},
    {"max_queue", LK_OPT_INT, "10",
     "events buffered before they are written (torch's max_queue)",
     "[1, 1000000]"},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_logger_ops logger_ops = {.start = start,
                                         .log_metrics = log_metrics,
                                         .save = save,
                                         .finalize = finalize};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_PLUGIN(
    "tensorboard",
    "every metrics.csv row as TensorBoard scalars, and the config "
    "as text, in RUN_DIR/events.out.tfevents.<time>.<host>",
    destroy, check_state, .logger = &logger_ops);

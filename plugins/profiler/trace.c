/* trace: a profiler that writes every action of the run as a complete event
 * of the Chrome trace-event format (JSON Object Format) to RUN_DIR/trace.json,
 * which Perfetto (ui.perfetto.dev) and chrome://tracing open.
 *
 * Memory stays bounded however long the run: an event is written when its
 * action stops, through the FILE's own buffer, and only the actions still
 * running are kept, on a fixed-size stack. start and stop run inside the
 * training loop, so they read the clock, touch the stack and write into the
 * buffer: no allocation, no lookup by name, no printf.
 *
 * Times are integer nanoseconds of CLOCK_MONOTONIC from the moment the file
 * is opened, printed as microseconds with exactly three decimals, so that a
 * nested event never appears to start before or end after its parent.
 *
 * The file is never an earlier one: a resumed run writing into the same run
 * directory gets trace-2.json (trace-3.json, ...) rather than overwriting
 * the trace of the run it continues. A run that starts no action still gets
 * a valid trace, with only its metadata events. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* clock_gettime, getpid */
#endif
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <loopkit/loopkit.h>

#include "bundled.h"

#define MAX_DEPTH 64            /* the loop nests about 6 deep */
#define BUFFER_SIZE (64 * 1024) /* about 600 events between writes */
#define MAX_VARIANTS 1000       /* trace-2.json ... trace-1000.json */
#define TID 1                   /* the loop runs on one thread */
#define NUMBER_LEN 24           /* "18446744073709551.615" and a NUL */

typedef struct action {
  char *name;
  /* The event up to its time stamp, made once by action():
   * ",\n{"name":"...","ph":"X","pid":P,"tid":T,"ts":" */
  char *head;
  size_t head_len;
} action;

typedef struct frame {
  int id;
  uint64_t start; /* ns since origin */
} frame;

typedef struct trace {
  lk_host *host;
  char *file; /* the option: a plain file name */
  long pid;
  action *actions;
  size_t n, cap;

  frame stack[MAX_DEPTH];
  size_t depth;
  uint64_t excess; /* actions running beyond MAX_DEPTH, not recorded */

  FILE *out;
  char *buffer;    /* out's buffer, freed after fclose */
  char *path;      /* the file being written, or that could not be */
  uint64_t origin; /* CLOCK_MONOTONIC ns when the file was opened */
  uint64_t events;
  int error; /* errno of the first failure; 0 while all is well */

  /* What went wrong in the nesting, reported at the end. */
  uint64_t too_deep, unmatched, unfinished;
} trace;

static uint64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- text ---------------------------------------------------------------- */

/* A growing string, only used outside the hot path. */
typedef struct text {
  char *s;
  size_t len, cap;
  bool nomem;
} text;

static void put(text *t, const char *s, size_t n) {
  if (t->nomem)
    return;
  if (t->len + n + 1 > t->cap) {
    size_t cap = t->cap ? t->cap : 64;
    while (t->len + n + 1 > cap)
      cap *= 2;
    char *grown = realloc(t->s, cap);
    if (!grown) {
      t->nomem = true;
      return;
    }
    t->s = grown;
    t->cap = cap;
  }
  memcpy(t->s + t->len, s, n);
  t->len += n;
  t->s[t->len] = '\0';
}

static void puts_text(text *t, const char *s) {
  put(t, s, strlen(s));
}

/* The length of the valid UTF-8 sequence at S (1 to 4), or 0. JSON text
 * must be UTF-8, and a stray byte would make the whole file unreadable. */
static size_t utf8_length(const unsigned char *s) {
  if (s[0] < 0x80)
    return 1;
  size_t n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : 2;
  if (s[0] < 0xc2 || s[0] > 0xf4)
    return 0; /* a continuation byte, or the start of an overlong form */
  uint32_t c = s[0] & (0x7fu >> n);
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    c = c << 6 | (s[i] & 0x3fu);
  }
  /* Overlong forms, surrogates and code points past U+10FFFF. */
  static const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < least[n] || (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
    return 0;
  return n;
}

/* NAME as a JSON string's contents; a byte that is not UTF-8 becomes
 * U+FFFD. */
static void put_escaped(text *t, const char *name) {
  const unsigned char *s = (const unsigned char *)name;
  while (*s) {
    char esc[8];
    size_t n = utf8_length(s);
    if (n == 0) {
      puts_text(t, "\\ufffd");
      s++;
    } else if (*s == '"' || *s == '\\') {
      esc[0] = '\\';
      esc[1] = (char)*s++;
      put(t, esc, 2);
    } else if (*s < 0x20) {
      snprintf(esc, sizeof esc, "\\u%04x", *s++);
      puts_text(t, esc);
    } else {
      put(t, (const char *)s, n);
      s += n;
    }
  }
}

/* ---- the file ------------------------------------------------------------ */

/* Remembers the first failure and says so once; start and stop cannot
 * return it, report does. */
static void failed(trace *t, int err) {
  if (t->error)
    return;
  t->error = err ? err : EIO;
  if (t->host) /* NULL in destroy: too late to log */
    lk_log(t->host, LK_LOG_WARN,
           "cannot write %s: %s; the trace is lost and the run will fail at "
           "its end",
           t->path ? t->path : t->file, strerror(t->error));
}

/* DIR/FILE, or for VARIANT > 1 the same with "-VARIANT" before the
 * extension (trace-2.json). */
static char *variant_path(const char *dir, const char *file, int variant) {
  const char *dot = strrchr(file, '.');
  if (!dot || dot == file)
    dot = file + strlen(file);
  char suffix[16] = "";
  if (variant > 1)
    snprintf(suffix, sizeof suffix, "-%d", variant);
  size_t len = strlen(dir) + 1 + strlen(file) + strlen(suffix) + 1;
  char *path = malloc(len);
  if (path)
    snprintf(path, len, "%s/%.*s%s%s", dir, (int)(dot - file), file, suffix,
             dot);
  return path;
}

/* Opens a file of DIR that does not exist yet ("x": never an earlier
 * run's trace). */
static FILE *create_file(trace *t, const char *dir) {
  for (int variant = 1; variant <= MAX_VARIANTS; variant++) {
    free(t->path);
    if (!(t->path = variant_path(dir, t->file, variant))) {
      failed(t, ENOMEM);
      return NULL;
    }
    FILE *f = fopen(t->path, "wx");
    if (f || errno != EEXIST) {
      if (!f)
        failed(t, errno);
      return f;
    }
  }
  failed(t, EEXIST);
  return NULL;
}

static void write_raw(trace *t, const char *s, size_t n) {
  if (!t->error && fwrite(s, 1, n, t->out) != n)
    failed(t, errno);
}

static void metadata(text *h, long pid, const char *what, const char *name) {
  char ids[64];
  snprintf(ids, sizeof ids, "\"ph\":\"M\",\"pid\":%ld,\"tid\":%d,", pid, TID);
  puts_text(h, "{\"name\":\"");
  puts_text(h, what);
  puts_text(h, "\",");
  puts_text(h, ids);
  puts_text(h, "\"args\":{\"name\":\"");
  put_escaped(h, name);
  puts_text(h, "\"}}");
}

/* Opens the trace in DIR and writes its head: the array's opening and the
 * metadata events, so that every event after them starts with a comma. */
static bool open_trace(trace *t, const char *dir) {
  char *buffer = malloc(BUFFER_SIZE);
  if (!buffer) {
    failed(t, ENOMEM);
    return false;
  }
  FILE *f = create_file(t, dir);
  if (!f) {
    free(buffer);
    return false;
  }
  setvbuf(f, buffer, _IOFBF, BUFFER_SIZE);
  t->out = f;
  t->buffer = buffer;
  t->origin = monotonic_ns();
  t->events = 0;
  t->depth = 0;
  t->excess = 0;
  text h = {0};
  puts_text(&h, "{\"traceEvents\":[\n");
  metadata(&h, t->pid, "process_name", "loopkit");
  puts_text(&h, ",\n");
  metadata(&h, t->pid, "thread_name", "training loop");
  if (h.nomem)
    failed(t, ENOMEM);
  else
    write_raw(t, h.s, h.len);
  free(h.s);
  return true;
}

/* Writes V (ns) as microseconds with three decimals into the bytes before
 * END and returns where it starts. */
static char *put_us(char *end, uint64_t v) {
  char *p = end;
  for (int i = 0; i < 3; i++) {
    *--p = (char)('0' + v % 10);
    v /= 10;
  }
  *--p = '.';
  do {
    *--p = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  return p;
}

static char *append(char *at, const char *s, size_t n) {
  memcpy(at, s, n);
  return at + n;
}

static char *append_us(char *at, uint64_t ns) {
  char digits[NUMBER_LEN];
  char *from = put_us(digits + sizeof digits, ns);
  return append(at, from, (size_t)(digits + sizeof digits - from));
}

/* The event of the action in frame F, ending at END (ns since origin), in
 * one fwrite: each costs a lock. */
static void write_event(trace *t, const frame *f, uint64_t end,
                        bool unfinished) {
  static const char dur[] = ",\"dur\":";
  static const char unfinished_tail[] = ",\"args\":{\"unfinished\":true}}";
  enum { TAIL_ROOM = 2 * NUMBER_LEN + sizeof dur + sizeof unfinished_tail };
  char line[256], *at = line;
  const action *a = &t->actions[f->id];
  if (a->head_len <= sizeof line - TAIL_ROOM)
    at = append(at, a->head, a->head_len);
  else
    write_raw(t, a->head, a->head_len); /* a very long name */
  at = append_us(at, f->start);
  at = append(at, dur, sizeof dur - 1);
  at = append_us(at, end - f->start);
  if (unfinished)
    at = append(at, unfinished_tail, sizeof unfinished_tail - 1);
  else
    *at++ = '}';
  write_raw(t, line, (size_t)(at - line));
  t->events++;
}

/* Ends the actions still running at END, innermost first, down to DEPTH. */
static void close_frames(trace *t, size_t depth, uint64_t end) {
  while (t->depth > depth) {
    t->depth--;
    write_event(t, &t->stack[t->depth], end, true);
    t->unfinished++;
  }
}

/* Ends the trace: the actions still running end now, then the closing
 * brackets. Returns the errno of the first failure, or 0. */
static int finish(trace *t) {
  if (t->out) {
    if (!t->error)
      close_frames(t, 0, monotonic_ns() - t->origin);
    static const char end[] = "\n],\"displayTimeUnit\":\"ms\"}\n";
    write_raw(t, end, sizeof end - 1);
    if (ferror(t->out) && !t->error)
      failed(t, errno);
    if (fclose(t->out) != 0 && !t->error)
      failed(t, errno);
    t->out = NULL;
    free(t->buffer);
    t->buffer = NULL;
  }
  return t->error;
}

/* ---- the plugin ---------------------------------------------------------- */

static bool plain_file_name(const char *s) {
  return *s && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static int create(lk_host *host, const lk_options *o, void **self) {
  const char *file = lk_opt_string(o, "file");
  if (!plain_file_name(file))
    return lk_fail(host, LK_EINVAL,
                   "option file = \"%s\": expected a plain file name (no '/'), "
                   "written in the run directory",
                   file);
  trace *t = calloc(1, sizeof *t);
  if (!t || !(t->file = malloc(strlen(file) + 1))) {
    free(t);
    return lk_fail(host, LK_ENOMEM, "out of memory");
  }
  strcpy(t->file, file);
  t->host = host;
  t->pid = (long)getpid();
  *self = t;
  return 0;
}

static void destroy(void *self) {
  trace *t = self;
  t->host = NULL;
  finish(t); /* torn down before report: still a valid file */
  for (size_t i = 0; i < t->n; i++) {
    free(t->actions[i].name);
    free(t->actions[i].head);
  }
  free(t->actions);
  free(t->path);
  free(t->file);
  free(t);
}

static int add_action(trace *t, const char *name) {
  if (t->n == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 16;
    action *grown = realloc(t->actions, cap * sizeof *grown);
    if (!grown)
      return lk_fail(t->host, LK_ENOMEM, "out of memory");
    t->actions = grown;
    t->cap = cap;
  }
  char ids[80];
  snprintf(ids, sizeof ids,
           "\",\"ph\":\"X\",\"pid\":%ld,\"tid\":%d,\"ts\":", t->pid, TID);
  text h = {0};
  puts_text(&h, ",\n{\"name\":\"");
  put_escaped(&h, name);
  puts_text(&h, ids);
  char *copy = malloc(strlen(name) + 1);
  if (h.nomem || !copy) {
    free(h.s);
    free(copy);
    return lk_fail(t->host, LK_ENOMEM, "out of memory");
  }
  strcpy(copy, name);
  t->actions[t->n] = (action){.name = copy, .head = h.s, .head_len = h.len};
  return (int)t->n++;
}

static int action_id(void *self, const char *name) {
  trace *t = self;
  if (!name || !*name)
    return lk_fail(t->host, LK_EINVAL, "an action needs a name");
  if (t->n >= (size_t)INT32_MAX)
    return lk_fail(t->host, LK_EINVAL, "too many actions");
  for (size_t i = 0; i < t->n; i++)
    if (strcmp(t->actions[i].name, name) == 0)
      return (int)i;
  return add_action(t, name);
}

/* The file opens at the first action: the run directory does not exist yet
 * when the plugin is created. Without one (a gradient check) there is
 * nothing to write. */
static bool ready(trace *t) {
  if (t->out)
    return !t->error;
  if (t->error)
    return false;
  const char *dir = lk_host_run_dir(t->host);
  return dir && open_trace(t, dir) && !t->error;
}

static void start(void *self, int id) {
  trace *t = self;
  if (!ready(t) || id < 0 || (size_t)id >= t->n)
    return;
  if (t->depth == MAX_DEPTH || t->excess > 0) {
    t->excess++;
    t->too_deep++;
    return;
  }
  frame *f = &t->stack[t->depth++];
  f->id = id;
  f->start = monotonic_ns() - t->origin;
}

static void stop(void *self, int id) {
  uint64_t now = monotonic_ns();
  trace *t = self;
  if (!t->out || t->error)
    return;
  if (t->excess > 0) {
    t->excess--;
    return;
  }
  /* Usually the top; deeper when inner actions never stopped (an entry
   * that failed between them): those end here, inside this one. */
  size_t k = t->depth;
  while (k > 0 && t->stack[k - 1].id != id)
    k--;
  if (k == 0) {
    t->unmatched++;
    return;
  }
  uint64_t end = now - t->origin;
  close_frames(t, k, end);
  t->depth = k - 1;
  write_event(t, &t->stack[k - 1], end, false);
}

static void warn_nesting(trace *t) {
  if (t->too_deep)
    lk_log(t->host, LK_LOG_WARN,
           "%llu actions nested deeper than %d were not recorded",
           (unsigned long long)t->too_deep, MAX_DEPTH);
  if (t->unmatched)
    lk_log(t->host, LK_LOG_WARN,
           "%llu stops without a matching start were ignored",
           (unsigned long long)t->unmatched);
  if (t->unfinished)
    lk_log(t->host, LK_LOG_INFO,
           "%llu actions never stopped; they end with the action around "
           "them or at the report (\"unfinished\" in their args)",
           (unsigned long long)t->unfinished);
  t->too_deep = t->unmatched = t->unfinished = 0;
}

static int report(void *self, const char *run_dir) {
  trace *t = self;
  if (!t->out && !t->error && run_dir)
    open_trace(t, run_dir);
  int err = finish(t);
  warn_nesting(t);
  if (err) {
    t->error = 0; /* a later run of this instance tries again */
    return lk_fail(t->host, LK_EIO, "cannot write %s: %s",
                   t->path ? t->path : t->file, strerror(err));
  }
  if (t->path)
    lk_log(t->host, LK_LOG_INFO, "%llu events written to %s",
           (unsigned long long)t->events, t->path);
  return 0;
}

static const lk_option options[] = {
    {"file", LK_OPT_STRING, "trace.json",
     "file name in the run directory (trace-2.json, ... if it exists)", NULL},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_profiler_ops profiler_ops = {
    .action = action_id, .start = start, .stop = stop, .report = report};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor =
    BUNDLED_PLUGIN("trace",
                   "every action as a Chrome trace event (trace.json, for "
                   "Perfetto and chrome://tracing)",
                   destroy, NULL, .profiler = &profiler_ops);

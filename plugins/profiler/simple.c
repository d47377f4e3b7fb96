/* simple: a profiler like Lightning's SimpleProfiler. It sums the wall time
 * of each action between start and stop and, at the end, writes the table
 * Lightning prints ("FIT Profiler Report", extended layout) to
 * RUN_DIR/profile.txt and to the log.
 *
 * start and stop run inside the training loop, so they only read the clock
 * and touch the action's slot: no allocation, no lookup by name. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* clock_gettime, open_memstream */
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>
#define HAVE_TSC 1
#endif

#include <loopkit/loopkit.h>

#include "bundled.h"

typedef struct action {
  char *name;
  uint64_t started; /* ticks */
  int running;
  uint64_t count;
  uint64_t total; /* ticks */
} action;

typedef struct simple {
  lk_host *host;
  struct timespec created;
  uint64_t created_ticks;
  action *actions;
  size_t n, cap;
} simple;

/* The clock: clock_gettime costs about 25 ns here and a profiled closure
 * reads it eight times, so where the time-stamp counter is invariant (it
 * ticks at one rate whatever the CPU's frequency) start and stop read that
 * instead, and the report converts ticks to seconds with the rate measured
 * against CLOCK_MONOTONIC over the whole run. */
static int use_tsc = -1;

static uint64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int tsc_is_invariant(void) {
#ifdef HAVE_TSC
  unsigned a, b, c, d;
  if (__get_cpuid(0x80000007, &a, &b, &c, &d))
    return (d >> 8) & 1;
#endif
  return 0;
}

static inline uint64_t ticks(void) {
#ifdef HAVE_TSC
  if (use_tsc)
    return __rdtsc();
#endif
  return monotonic_ns();
}

static double seconds_between(const struct timespec *a,
                              const struct timespec *b) {
  return (double)(b->tv_sec - a->tv_sec) +
         1e-9 * (double)(b->tv_nsec - a->tv_nsec);
}

static int create(lk_host *host, const lk_options *o, void **self) {
  (void)o;
  simple *s = calloc(1, sizeof *s);
  if (!s)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  s->host = host;
  if (use_tsc < 0)
    use_tsc = tsc_is_invariant();
  clock_gettime(CLOCK_MONOTONIC, &s->created);
  s->created_ticks = ticks();
  *self = s;
  return 0;
}

static void destroy(void *self) {
  simple *s = self;
  for (size_t i = 0; i < s->n; i++)
    free(s->actions[i].name);
  free(s->actions);
  free(s);
}

static int action_id(void *self, const char *name) {
  simple *s = self;
  if (!name || !*name)
    return lk_fail(s->host, LK_EINVAL, "an action needs a name");
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->actions[i].name, name) == 0)
      return (int)i;
  if (s->n >= (size_t)INT32_MAX)
    return lk_fail(s->host, LK_EINVAL, "too many actions");
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 16;
    action *grown = realloc(s->actions, cap * sizeof *grown);
    if (!grown)
      return lk_fail(s->host, LK_ENOMEM, "out of memory");
    s->actions = grown;
    s->cap = cap;
  }
  char *copy = malloc(strlen(name) + 1);
  if (!copy)
    return lk_fail(s->host, LK_ENOMEM, "out of memory");
  strcpy(copy, name);
  s->actions[s->n] = (action){.name = copy};
  return (int)s->n++;
}

static void start(void *self, int id) {
  simple *s = self;
  if (id < 0 || (size_t)id >= s->n)
    return;
  action *a = &s->actions[id];
  a->running = 1;
  a->started = ticks();
}

static void stop(void *self, int id) {
  uint64_t now = ticks();
  simple *s = self;
  if (id < 0 || (size_t)id >= s->n || !s->actions[id].running)
    return; /* a stop without a start measures nothing */
  action *a = &s->actions[id];
  a->running = 0;
  a->total += now - a->started;
  a->count++;
}

/* ---- the report --------------------------------------------------------- */

/* A number as Python's f"{x:.5}", which is %.5g except that an integral
 * result gets ".0" ("100.0") and that it takes an exponent one digit
 * earlier ("1.2345e+04" where %.5g gives "12345"). */
static void format5(char *buf, size_t len, double x) {
  char sci[32];
  snprintf(sci, sizeof sci, "%.4e", x); /* its exponent is the one %g uses */
  char *e = strchr(sci, 'e');
  if (e && strtol(e + 1, NULL, 10) == 4) {
    char *end = e; /* drop the mantissa's trailing zeros, as %g does */
    while (end[-1] == '0')
      end--;
    if (end[-1] == '.')
      end--;
    snprintf(buf, len, "%.*s%s", (int)(end - sci), sci, e);
    return;
  }
  snprintf(buf, len, "%.5g", x);
  if (!strpbrk(buf, ".eni")) /* no point, exponent, inf or nan */
    strncat(buf, ".0", len - strlen(buf) - 1);
}

/* One row of Lightning's log_row_extended, with its leading newline. */
static void row(FILE *f, int key_width, const char *name, const char *mean,
                const char *calls, const char *total, const char *percent) {
  fprintf(f, "\n|  %-*s\t|  %-15s\t|  %-15s\t|  %-15s\t|  %-15s\t|", key_width,
          name, mean, calls, total, percent);
}

/* The width of LINE with tabs expanded to multiples of 8 (expandtabs). */
static size_t expanded_width(const char *line) {
  size_t col = 0;
  for (const char *p = line; *p; p++)
    col = *p == '\t' ? (col / 8 + 1) * 8 : col + 1;
  return col;
}

/* The length Lightning gives its separator lines: that of the header row
 * with tabs expanded, counting the row's leading newline. The first cell,
 * "|  Action" padded to the widest name, ends at a tab stop, so the rest of
 * the row has a fixed width. */
static size_t header_width(int key_width) {
  size_t first = 3 + (size_t)(key_width > 6 ? key_width : 6);
  return (first / 8 + 1) * 8 +
         expanded_width("|  Mean duration (s)\t|  Num calls      \t|  "
                        "Total time (s) \t|  Percentage %   \t|") +
         1;
}

static void dashes(FILE *f, size_t n) {
  fputc('\n', f);
  for (size_t i = 0; i < n; i++)
    fputc('-', f);
}

static char *make_report(simple *s) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  uint64_t now_ticks = ticks();
  double wall = seconds_between(&s->created, &now);
  /* Seconds per tick, measured over the run (1e-9 with the fallback). */
  double tick = now_ticks > s->created_ticks
                    ? wall / (double)(now_ticks - s->created_ticks)
                    : 1e-9;

  /* Called actions, by percentage (total time) descending; the insertion
   * sort is stable, as Python's sort, so ties keep registration order. */
  size_t *order = malloc((s->n ? s->n : 1) * sizeof *order), m = 0;
  if (!order)
    return NULL;
  uint64_t calls = 0;
  int key_width = 0;
  for (size_t i = 0; i < s->n; i++) {
    const action *a = &s->actions[i];
    if (a->count == 0)
      continue;
    size_t j = m++;
    while (j > 0 && s->actions[order[j - 1]].total < a->total) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = i;
    calls += a->count;
    int len = (int)strlen(a->name);
    key_width = len > key_width ? len : key_width;
  }

  char *text = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&text, &size);
  if (!f) {
    free(order);
    return NULL;
  }
  fputs("FIT Profiler Report\n", f);
  if (m > 0) {
    size_t width = header_width(key_width);
    char mean[32], count[32], total[32], percent[32];
    dashes(f, width);
    row(f, key_width, "Action", "Mean duration (s)", "Num calls",
        "Total time (s)", "Percentage %");
    dashes(f, width);
    snprintf(count, sizeof count, "%llu", (unsigned long long)calls);
    format5(total, sizeof total, wall);
    row(f, key_width, "Total", "-", count, total, "100 %");
    dashes(f, width);
    for (size_t k = 0; k < m; k++) {
      const action *a = &s->actions[order[k]];
      double secs = tick * (double)a->total;
      format5(mean, sizeof mean, secs / (double)a->count);
      snprintf(count, sizeof count, "%llu", (unsigned long long)a->count);
      format5(total, sizeof total, secs);
      format5(percent, sizeof percent, wall > 0 ? 100.0 * secs / wall : 0);
      row(f, key_width, a->name, mean, count, total, percent);
    }
    dashes(f, width);
  }
  fputc('\n', f);
  free(order);
  if (fclose(f) != 0) {
    free(text);
    return NULL;
  }
  return text;
}

static int report(void *self, const char *run_dir) {
  simple *s = self;
  char *text = make_report(s);
  if (!text)
    return lk_fail(s->host, LK_ENOMEM, "out of memory for the report");
  int rc = 0;
  if (run_dir) {
    size_t len = strlen(run_dir) + sizeof "/profile.txt";
    char *path = malloc(len);
    if (!path) {
      free(text);
      return lk_fail(s->host, LK_ENOMEM, "out of memory");
    }
    snprintf(path, len, "%s/profile.txt", run_dir);
    /* Replaced whole, never written through a link (the library says why
     * it could not). */
    lk_output *out;
    rc = lk_output_open(path, "profile", &out);
    if (rc == 0) {
      fputs(text, lk_output_stream(out));
      rc = lk_output_close(out, true);
    }
    free(path);
  }
  lk_log(s->host, LK_LOG_INFO, "%s", text);
  free(text);
  return rc;
}

static const lk_profiler_ops profiler_ops = {
    .action = action_id, .start = start, .stop = stop, .report = report};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor =
    BUNDLED_DESCRIPTOR(.name = "simple",
                       .summary =
                           "wall time per action, reported like Lightning's "
                           "SimpleProfiler (profile.txt)",
                       .create = create, .destroy = destroy,
                       .profiler = &profiler_ops);

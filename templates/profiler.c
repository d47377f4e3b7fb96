/* @NAME@: counts and times every action of the loop (training_step,
 * backward, optimizer_step, the closure, ...) and writes a table of them
 * into the run directory. A loopkit plugin of kind profiler, written by
 * `loopkit new`.
 *
 * Try it:   make && loopkit train @NAME@.ini
 * @NAME@.ini minimises the bundled rosenbrock function with the bundled
 * sgd; at the end this profiler writes RUN_DIR/@NAME@.txt (the option
 * file) and logs the same table.
 *
 * The host profiles by wrapping: with a profiler configured, it replaces
 * every plugin entry it calls with a function that calls start, the entry
 * and stop. Actions nest as the calls do (the closure inside
 * optimizer_step, training_step inside the closure). start and stop run in
 * the middle of training, millions of times: they only read the clock and
 * touch the action's slot, with no allocation and no lookup by name.
 * Timings are not worth resuming: this plugin has no state. */
#if !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE)
#define _POSIX_C_SOURCE 200809L /* clock_gettime, open_memstream: -std=c11 */
#endif
#include "preamble.h"

#include <time.h>

typedef struct action {
  char *name;
  uint64_t calls;
  uint64_t started; /* ns, while running */
  uint64_t total;   /* ns */
  bool running;
} action;

typedef struct profiler {
  lk_host *host;
  const char *file; /* the option's value: valid until destroy */
  action *actions;
  size_t n, cap;
} profiler;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void destroy(void *self) {
  profiler *p = self;
  for (size_t i = 0; i < p->n; i++)
    free(p->actions[i].name);
  free(p->actions);
  free(p);
}

static int create(lk_host *host, const lk_options *opts, void **self) {
  const char *file = lk_opt_string(opts, "file");
  if (!*file || strchr(file, '/'))
    return lk_fail(host, LK_ECONFIG,
                   "option file = \"%s\": must be a plain file name (it is "
                   "written into the run directory)",
                   file);
  profiler *p = calloc(1, sizeof *p);
  if (!p)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  p->host = host;
  p->file = file;
  *self = p;
  return 0;
}

/* action: the host asks for the id of each action NAME once, when the run
 * is set up; start and stop then get the id. NAME belongs to the host:
 * keep a copy. The same name gets the same id. */
static int action_id(void *self, const char *name) {
  profiler *p = self;
  for (size_t i = 0; i < p->n; i++)
    if (strcmp(p->actions[i].name, name) == 0)
      return (int)i;
  if (p->n == p->cap) {
    size_t cap = p->cap ? 2 * p->cap : 16;
    action *grown = realloc(p->actions, cap * sizeof *grown);
    if (!grown)
      return lk_fail(p->host, LK_ENOMEM, "out of memory");
    p->actions = grown;
    p->cap = cap;
  }
  char *copy = malloc(strlen(name) + 1);
  if (!copy)
    return lk_fail(p->host, LK_ENOMEM, "out of memory");
  strcpy(copy, name);
  p->actions[p->n] = (action){.name = copy};
  return (int)p->n++;
}

/* start and stop return nothing: they cannot fail, only ignore an id they
 * never gave out or a stop without its start. */
static void start(void *self, int id) {
  profiler *p = self;
  if (id < 0 || (size_t)id >= p->n)
    return;
  p->actions[id].running = true;
  p->actions[id].started = now_ns();
}

static void stop(void *self, int id) {
  uint64_t t = now_ns();
  profiler *p = self;
  if (id < 0 || (size_t)id >= p->n || !p->actions[id].running)
    return;
  action *a = &p->actions[id];
  a->running = false;
  a->total += t - a->started;
  a->calls++;
}

/* For qsort: most time first. */
static int by_total(const void *a, const void *b) {
  uint64_t ta = (*(const action *const *)a)->total;
  uint64_t tb = (*(const action *const *)b)->total;
  return ta < tb ? 1 : ta > tb ? -1 : 0;
}

/* The table into a new string, most time first; actions never called are
 * left out. NULL when out of memory. */
static char *make_table(const profiler *p) {
  const action **rows = malloc((p->n ? p->n : 1) * sizeof *rows);
  char *text = NULL;
  size_t len = 0;
  FILE *f = rows ? open_memstream(&text, &len) : NULL;
  if (!f) {
    free(rows);
    return NULL;
  }
  for (size_t i = 0; i < p->n; i++)
    rows[i] = &p->actions[i];
  qsort(rows, p->n, sizeof *rows, by_total);
  fprintf(f, "%-24s %10s %14s %14s\n", "action", "calls", "total (s)",
          "mean (us)");
  for (size_t i = 0; i < p->n; i++)
    if (rows[i]->calls)
      fprintf(f, "%-24s %10llu %14.6f %14.3f\n", rows[i]->name,
              (unsigned long long)rows[i]->calls, 1e-9 * (double)rows[i]->total,
              1e-3 * (double)rows[i]->total / (double)rows[i]->calls);
  free(rows);
  if (fclose(f) != 0) {
    free(text);
    return NULL;
  }
  return text;
}

/* report: once, at the end of training, with the run directory (NULL when
 * this process does not write one: ranks other than 0 of a distributed
 * run). A failure here fails the run. */
static int report(void *self, const char *run_dir) {
  profiler *p = self;
  char *text = make_table(p);
  if (!text)
    return lk_fail(p->host, LK_ENOMEM, "out of memory for the report");
  lk_log(p->host, LK_LOG_INFO, "time per action:\n%s", text);
  int rc = 0;
  if (run_dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", run_dir, p->file);
    /* Written as loopkit writes its own files (lk_output_open): replaced
     * whole, never through a link; the library says why when it cannot. */
    lk_output *out;
    rc = lk_output_open(path, "report", &out);
    if (rc == 0) {
      fputs(text, lk_output_stream(out));
      rc = lk_output_close(out, true);
    }
  }
  free(text);
  return rc;
}

static const lk_option options[] = {
    {"file", LK_OPT_STRING, "@NAME@.txt",
     "the report's file name, in the run directory", NULL},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_profiler_ops profiler_ops = {
    .action = action_id, .start = start, .stop = stop, .report = report};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION, /* the ABI this file was compiled for */
    .size = sizeof(lk_descriptor),
    .name = "@NAME@", /* its [section] in a config */
    .version = "0.1",
    .summary = "counts and times every action; a table in the run directory",
    .options = options,
    .create = create,
    .destroy = destroy,
    .profiler = &profiler_ops,
};

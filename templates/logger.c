/* @NAME@: a logger that writes every metrics.csv row as a line of JSON to
 * RUN_DIR/@NAME@.jsonl ({"step": 3, "epoch": 0, "loss": 0.52, ...}), and
 * goes on with the same file when the run is resumed. A loopkit plugin of
 * kind logger, written by `loopkit new`.
 *
 * Try it:   make && loopkit train @NAME@.ini
 * @NAME@.ini trains the bundled linear model on data.csv (csv data plugin,
 * sgd) with this logger: RUN_DIR/@NAME@.jsonl has a line per row of
 * RUN_DIR/metrics.csv, and the log says where the rows went.
 *
 * The host calls a logger where it writes metrics.csv (one process of a
 * distributed run: rank 0): start once a training session starts,
 * log_metrics for every row, save before every checkpoint, finalize at
 * the end. Several loggers may run at once ([plugins] loggers = a, b);
 * each gets every row.
 *
 * Resuming: a run killed after its last checkpoint logged rows that the
 * resumed run logs again. So save records in state (lk_host_add_state) how
 * long the file was at the checkpoint, and start cuts the file back to
 * that length, or, when the resume writes a new run directory, begins the
 * new file with that much of the source run's: every row is in the file
 * once. */
#if !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE)
#define _POSIX_C_SOURCE 200809L /* truncate: -std=c11 */
#endif
#include "preamble.h"

#include <errno.h>
#include <unistd.h>

typedef struct logger {
  lk_host *host;
  const char *file; /* option: the file's name in the run directory */
  lk_tensor *size;  /* state: the file's length at the last checkpoint */
  FILE *f;
  char path[4096];
  uint64_t rows; /* logged in this session */
} logger;

static void destroy(void *self) {
  logger *l = self;
  if (l->f)
    fclose(l->f);
  free(l);
}

static int create(lk_host *host, const lk_options *opts, void **self) {
  const char *file = lk_opt_string(opts, "file");
  if (!*file || strchr(file, '/'))
    return lk_fail(host, LK_ECONFIG,
                   "option file = \"%s\": must be a plain file name (it is "
                   "written into the run directory)",
                   file);
  logger *l = calloc(1, sizeof *l);
  if (!l)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  l->host = host;
  l->file = file;
  size_t one = 1;
  /* Host state: zero-filled now, saved in every checkpoint, given back on
   * --resume before start. */
  int rc = lk_host_add_state(host, "size", LK_F64, 1, &one, &l->size);
  if (rc != 0) {
    free(l);
    return rc;
  }
  *self = l;
  return 0;
}

/* A resume: only a length the file could have had. */
static int check_state(void *self) {
  logger *l = self;
  return lk_state_check(l->host, l->size, 0, LK_STATE_MAX_COUNT, true);
}

/* The first SIZE bytes of FROM, copied to the new file. */
static int copy_prefix(logger *l, const char *from, long size) {
  FILE *in = fopen(from, "r");
  long n = 0;
  int c;
  while (in && n < size && (c = getc(in)) != EOF && putc(c, l->f) != EOF)
    n++;
  if (in)
    fclose(in);
  if (n < size)
    lk_log(l->host, LK_LOG_WARN,
           "%s has %ld of the %ld bytes the checkpoint's rows took: the "
           "rows before it are missing from %s",
           from, n, size, l->path);
  return 0;
}

/* Once per training session, before its first row. RUN says where the
 * run writes (run_dir), its effective config (config: what config.ini
 * holds, for a logger that records hyper-parameters), and whether it
 * resumes from a checkpoint, and how. */
static int start(void *self, const lk_logger_start *run) {
  logger *l = self;
  snprintf(l->path, sizeof l->path, "%s/%s", run->run_dir, l->file);
  long size = (long)((double *)l->size->data)[0];
  if (run->resumed && run->in_place) {
    /* The same directory: cut what came after the checkpoint. */
    if (truncate(l->path, size) != 0 && errno != ENOENT)
      return lk_fail(l->host, LK_EIO, "cannot cut %s back to %ld bytes: %s",
                     l->path, size, strerror(errno));
    l->f = fopen(l->path, "a");
  } else {
    l->f = fopen(l->path, "w");
    if (l->f && run->resumed && run->resumed_from) {
      /* A new run directory: the rows before the checkpoint are in the
       * run directory that wrote it. */
      char from[4096];
      snprintf(from, sizeof from, "%s/%s", run->resumed_from, l->file);
      copy_prefix(l, from, size);
    }
  }
  if (!l->f)
    return lk_fail(l->host, LK_EIO, "cannot open %s: %s", l->path,
                   strerror(errno));
  lk_log(l->host, LK_LOG_INFO, "rows go to %s from step %llu (%s)", l->path,
         (unsigned long long)run->step,
         !run->resumed   ? "a new run"
         : run->in_place ? "resumed in place"
                         : "resumed in a new run directory");
  return 0;
}

/* Every row of metrics.csv: the optimizer step, the epoch and the row's
 * cells by column name (loss, lr, val_loss, what a callback logged). The
 * names and values are the host's, valid during the call. */
static int log_metrics(void *self, uint64_t step, uint64_t epoch,
                       const lk_metric *metrics, size_t n) {
  logger *l = self;
  fprintf(l->f, "{\"step\": %llu, \"epoch\": %llu", (unsigned long long)step,
          (unsigned long long)epoch);
  for (size_t i = 0; i < n; i++) {
    /* Column names are plain (no quote, comma or newline); JSON has no
     * NaN or infinity: those are null. */
    if (isfinite(metrics[i].value))
      fprintf(l->f, ", \"%s\": %.17g", metrics[i].name, metrics[i].value);
    else
      fprintf(l->f, ", \"%s\": null", metrics[i].name);
  }
  fputs("}\n", l->f);
  l->rows++;
  return ferror(l->f) ? lk_fail(l->host, LK_EIO, "cannot write %s", l->path)
                      : 0;
}

/* Before every checkpoint: the rows so far on disk, and the file's length
 * in the state the checkpoint saves. */
static int save(void *self) {
  logger *l = self;
  if (fflush(l->f) != 0)
    return lk_fail(l->host, LK_EIO, "cannot write %s: %s", l->path,
                   strerror(errno));
  ((double *)l->size->data)[0] = (double)ftell(l->f);
  return 0;
}

/* The session ended: STATUS is "success", "failed" or "interrupted". */
static int finalize(void *self, const char *status) {
  logger *l = self;
  int rc = fclose(l->f) == 0
               ? 0
               : lk_fail(l->host, LK_EIO, "cannot write %s", l->path);
  l->f = NULL;
  lk_log(l->host, LK_LOG_INFO, "%llu rows logged to %s (%s)",
         (unsigned long long)l->rows, l->path, status);
  return rc;
}

static const lk_option options[] = {{"file", LK_OPT_STRING, "@NAME@.jsonl",
                                     "the file's name, in the run directory",
                                     NULL},
                                    {NULL, 0, NULL, NULL, NULL}};

static const lk_logger_ops logger_ops = {.start = start,
                                         .log_metrics = log_metrics,
                                         .save = save,
                                         .finalize = finalize};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION, /* the ABI this file was compiled for */
    .size = sizeof(lk_descriptor),
    .name = "@NAME@", /* its [section] in a config */
    .version = "0.1",
    .summary = "every metrics.csv row as a line of JSON, resumed in place",
    .options = options,
    .create = create,
    .destroy = destroy,
    .check_state = check_state,
    .logger = &logger_ops,
};

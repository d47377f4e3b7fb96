/* rowlog: a logger for tests that appends every call it gets to a text
 * file, so that a test sees what the host gave the loggers, in order:
 *
 *   start resumed=R in_place=I from=DIR|- epoch=E step=S rows=N saves=K
 *         dir=RUN_DIR
 *   config LINE                    (each line of the effective config)
 *   row STEP EPOCH NAME=VALUE ...  (values as metrics.csv writes them)
 *   save
 *   finalize STATUS
 *
 * file (option) is the file's path, relative to the run directory, or
 * absolute; the file is only appended to, never cut, so it keeps what a
 * killed session logged too. fail names an entry that fails (to test how
 * the host reports a logger's failure). It has a state tensor, saves,
 * counting the saves it was asked for, which a resumed run starts from. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

typedef struct rowlog {
  lk_host *host;
  const char *file, *fail;
  FILE *f;
  lk_tensor *saves; /* state */
} rowlog;

static int failing(rowlog *r, const char *entry) {
  return strcmp(r->fail, entry) == 0
             ? lk_fail(r->host, LK_EIO, "rowlog fails in %s, as asked", entry)
             : 0;
}

static int start(void *self, const lk_logger_start *run) {
  rowlog *r = self;
  char path[4096];
  if (r->file[0] == '/')
    snprintf(path, sizeof path, "%s", r->file);
  else
    snprintf(path, sizeof path, "%s/%s", run->run_dir, r->file);
  if (!(r->f = fopen(path, "a")))
    return lk_fail(r->host, LK_EIO, "cannot open %s", path);
  fprintf(r->f,
          "start resumed=%d in_place=%d from=%s epoch=%llu step=%llu "
          "rows=%llu saves=%.0f dir=%s\n",
          run->resumed, run->in_place,
          run->resumed_from ? run->resumed_from : "-",
          (unsigned long long)run->epoch, (unsigned long long)run->step,
          (unsigned long long)run->rows, ((double *)r->saves->data)[0],
          run->run_dir);
  for (const char *l = run->config; *l;) {
    size_t n = strcspn(l, "\n");
    fprintf(r->f, "config %.*s\n", (int)n, l);
    l += n + (l[n] == '\n');
  }
  fflush(r->f);
  return failing(r, "start");
}

static int log_metrics(void *self, uint64_t step, uint64_t epoch,
                       const lk_metric *m, size_t n) {
  rowlog *r = self;
  fprintf(r->f, "row %llu %llu", (unsigned long long)step,
          (unsigned long long)epoch);
  for (size_t i = 0; i < n; i++)
    fprintf(r->f, " %s=%.17g", m[i].name, m[i].value);
  fputc('\n', r->f);
  fflush(r->f);
  return failing(r, "log_metrics");
}

static int save(void *self) {
  rowlog *r = self;
  ((double *)r->saves->data)[0]++;
  fprintf(r->f, "save\n");
  fflush(r->f);
  return failing(r, "save");
}

static int finalize(void *self, const char *status) {
  rowlog *r = self;
  fprintf(r->f, "finalize %s\n", status);
  fclose(r->f);
  r->f = NULL;
  return failing(r, "finalize");
}

static int create(lk_host *host, const lk_options *o, void **self) {
  rowlog *r = calloc(1, sizeof *r);
  if (!r)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  r->host = host;
  r->file = lk_opt_string(o, "file");
  r->fail = lk_opt_string(o, "fail");
  size_t one = 1;
  int rc = lk_host_add_state(host, "saves", LK_F64, 1, &one, &r->saves);
  if (rc != 0) {
    free(r);
    return rc;
  }
  *self = r;
  return 0;
}

static void destroy(void *self) {
  rowlog *r = self;
  if (r->f)
    fclose(r->f);
  free(r);
}

static const lk_option options[] = {
    {"file", LK_OPT_STRING, "rowlog.txt",
     "where the calls go (relative to the run directory)", NULL},
    {"fail", LK_OPT_ENUM, "none", "an entry that fails",
     "none|start|log_metrics|save|finalize"},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_logger_ops ops = {.start = start,
                                  .log_metrics = log_metrics,
                                  .save = save,
                                  .finalize = finalize};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "rowlog",
    .version = "1",
    .summary = "test logger: every call it gets, appended to a file",
    .options = options,
    .create = create,
    .destroy = destroy,
    .logger = &ops,
};

/* The logger plugins ([plugins] loggers, ABI 1.5): every row of
 * metrics.csv also goes to each of them, in the listed order. They run
 * where metrics.csv is written (rank 0, with a run directory), start with
 * the training session, save with every checkpoint (what they record in
 * their state then is what a resumed run continues from) and are
 * finalized when the session ends, however it ends. log_metrics goes
 * through run->calls (calls.c), so that a profiler times it. */
#include <stdio.h>
#include <stdlib.h>

#include "loop.h"

static const lk__listed *loggers(const lk_run *run) {
  return &run->env.reg.listed[LK__KIND_LOGGER];
}

/* Entry E (an LK__ENTRY of lk_logger_ops) of logger IN, or NULL. */
static void (*entry(const lk__instance *in, size_t e))(void) {
  return lk__entry_of(in, LK__KIND_LOGGER, e);
}

int lk__loggers_start(lk_run *run) {
  const lk__listed *l = loggers(run);
  run->loggers.started = 0;
  if (l->n == 0 || !run->rows.csv)
    return 0; /* rank 0 writes the rows */
  char *config;
  /* The effective config, as config.ini holds it. */
  int rc = lk__config_text(run->cfg, &config, NULL);
  if (rc != 0)
    return rc;
  const lk__progress *p = &run->state.progress;
  lk_logger_start info = {
      .run_dir = run->rd.dir,
      .config = config,
      .resumed = run->resumed,
      .in_place = run->resumed && run->rd.in_place,
      .resumed_from = run->resumed && !run->rd.in_place ? run->rd.source : NULL,
      .epoch = p->epoch,
      .step = p->global_step,
      .rows = lk__metrics_rows(run->rows.csv),
  };
  for (size_t i = 0; i < l->n && rc == 0; i++) {
    const lk__instance *in = l->in[i];
    int (*start)(void *, const lk_logger_start *) =
        (int (*)(void *, const lk_logger_start *))entry(
            in, LK__ENTRY(lk_logger_ops, start));
    uint64_t mark = lk__err_mark();
    if (start && (rc = start(in->self, &info)) != 0)
      rc = lk__entry_failed(rc, mark, "start of logger %s", in->label);
    else
      run->loggers.started = i + 1;
  }
  free(config);
  return rc;
}

int lk__loggers_log(lk_run *run, uint64_t step, uint64_t epoch,
                    const double *loss, const lk__named *nm) {
  const lk__listed *l = loggers(run);
  if (run->loggers.started == 0)
    return 0;
  /* The row's cells as metrics.csv has them: loss first, when set. */
  lk_metric cells[sizeof nm->cells / sizeof nm->cells[0] + 1];
  size_t n = 0;
  if (loss)
    cells[n++] = (lk_metric){"loss", *loss};
  for (size_t i = 0; i < nm->n; i++)
    cells[n++] = nm->cells[i];
  for (size_t i = 0; i < run->loggers.started; i++) {
    uint64_t mark = lk__err_mark();
    int rc = run->calls.log_metrics[i](l->in[i]->self, step, epoch, cells, n);
    if (rc != 0)
      return lk__entry_failed(rc, mark, "log_metrics of logger %s",
                              l->in[i]->label);
  }
  return 0;
}

int lk__loggers_save(lk_run *run) {
  const lk__listed *l = loggers(run);
  for (size_t i = 0; i < run->loggers.started; i++) {
    const lk__instance *in = l->in[i];
    int (*save)(void *) =
        (int (*)(void *))entry(in, LK__ENTRY(lk_logger_ops, save));
    uint64_t mark = lk__err_mark();
    int rc = save ? save(in->self) : 0;
    if (rc != 0)
      return lk__entry_failed(rc, mark, "save of logger %s", in->label);
  }
  return 0;
}

int lk__loggers_finalize(lk_run *run, int rc) {
  const lk__listed *l = loggers(run);
  const char *status = rc == 0                 ? "success"
                       : rc == LK_EINTERRUPTED ? "interrupted"
                                               : "failed";
  if (run->loggers.started == 0)
    return rc;
  /* Every started logger is finalized, whatever the others do. The run's
   * own failure, or else the first logger's, is what is returned, with
   * its message; a later failure is logged. */
  char msg[2048];
  snprintf(msg, sizeof msg, "%s", rc ? lk_last_error() : "");
  for (size_t i = 0; i < run->loggers.started; i++) {
    const lk__instance *in = l->in[i];
    int (*finalize)(void *, const char *) = (int (*)(
        void *, const char *))entry(in, LK__ENTRY(lk_logger_ops, finalize));
    uint64_t mark = lk__err_mark();
    int frc = finalize ? finalize(in->self, status) : 0;
    if (frc == 0)
      continue;
    frc = lk__entry_failed(frc, mark, "finalize of logger %s", in->label);
    if (rc == 0) {
      rc = frc;
      snprintf(msg, sizeof msg, "%s", lk_last_error());
    } else {
      lk__log(&run->env, LK_LOG_WARN, "%s", lk_last_error());
    }
  }
  run->loggers.started = 0;
  return rc ? lk__err(rc, "%s", msg) : 0;
}

/* metrics.csv rows: what the loop logs at each window's end and after each
 * evaluation, what callbacks add to the next row, and the latest value of
 * every column (the loop state's, so that a resumed run's lk_host_metric
 * answers as the uninterrupted run's would). metrics.c writes the file;
 * loggers.c gives each row to the logger plugins too. */
#include <stdio.h>
#include <string.h>

#include "loop.h"

/* A name given twice (lr from the scheduler and from lr_monitor) keeps one
 * cell, the later value. Names are checked where they come from, so that
 * they fit. */
void lk__named_add(lk__named *nm, const char *prefix, const char *name,
                   double v) {
  char full[sizeof nm->names[0]];
  snprintf(full, sizeof full, "%s%s%s", prefix, *prefix ? "_" : "", name);
  for (size_t i = 0; i < nm->n; i++)
    if (strcmp(nm->names[i], full) == 0) {
      nm->cells[i].value = v;
      return;
    }
  if (nm->n == LK__MAX_NAMED)
    return;
  memcpy(nm->names[nm->n], full, sizeof full);
  nm->cells[nm->n] = (lk_metric){nm->names[nm->n], v};
  nm->n++;
}

void lk__named_result(lk__named *nm, const char *prefix,
                      const lk_step_result *r) {
  if (r->has_loss)
    lk__named_add(nm, prefix, "loss", r->loss);
  for (size_t m = 0; m < r->n_metrics; m++)
    lk__named_add(nm, prefix, r->metrics[m].name, r->metrics[m].value);
}

void lk__rows_seen(lk_run *run, const char *name, double value) {
  lk__loop_state *st = &run->state;
  for (size_t i = 0; i < st->n_latest; i++)
    if (strcmp(st->latest[i].name, name) == 0) {
      st->latest[i].value = value;
      return;
    }
  if (st->n_latest == LK__MAX_COLUMNS)
    return; /* metrics.csv refuses the column anyway */
  snprintf(st->latest[st->n_latest].name, sizeof st->latest[0].name, "%s",
           name);
  st->latest[st->n_latest++].value = value;
}

static int log_row(lk_run *run, uint64_t step, uint64_t epoch,
                   const double *loss, const lk__named *nm) {
  if (loss)
    lk__rows_seen(run, "loss", *loss);
  for (size_t i = 0; i < nm->n; i++)
    lk__rows_seen(run, nm->cells[i].name, nm->cells[i].value);
  if (!run->rows.csv)
    return 0; /* not rank 0: it writes metrics.csv */
  int rc = lk__metrics_row(run->rows.csv, step, epoch, loss, nm->cells, nm->n);
  return rc ? rc : lk__loggers_log(run, step, epoch, loss, nm);
}

int lk__rows_log(lk_run *run, uint64_t step, const double *loss,
                 const lk__named *nm) {
  return log_row(run, step, run->state.progress.epoch, loss, nm);
}

int lk__rows_log_evaluation(lk_run *run, uint64_t epoch, const char *prefix,
                            const lk__named *nm) {
  char line[1024];
  size_t used = 0;
  line[0] = '\0';
  for (size_t i = 0; i < nm->n && used < sizeof line; i++)
    used += (size_t)snprintf(line + used, sizeof line - used, " %s %.6g",
                             nm->cells[i].name, nm->cells[i].value);
  lk__log(&run->env, LK_LOG_INFO, "epoch %llu %s:%s", (unsigned long long)epoch,
          prefix, line);
  return log_row(run, run->state.progress.global_step, epoch, NULL, nm);
}

int lk__rows_extra(lk_run *run, const char *who, const char *name,
                   double value) {
  lk__rows *rows = &run->rows;
  if (!name || !lk__column_name_ok(name, strnlen(name, LK__NAME_MAX)))
    return lk__err(LK_EINVAL,
                   "plugin %s: metric name \"%s\" is not a column name (1 to "
                   "%d characters, no comma, quote or newline)",
                   who, name ? name : "(null)", LK__NAME_MAX - 1);
  for (size_t i = 0; i < rows->n_extra; i++)
    if (strcmp(rows->extra[i].name, name) == 0) {
      rows->extra[i].value = value;
      return 0;
    }
  if (rows->n_extra == LK__MAX_EXTRA)
    return lk__err(LK_EINVAL,
                   "plugin %s: more than %d metrics logged for one row", who,
                   LK__MAX_EXTRA);
  snprintf(rows->extra[rows->n_extra].name, sizeof rows->extra[0].name, "%s",
           name);
  rows->extra[rows->n_extra++].value = value;
  return 0;
}

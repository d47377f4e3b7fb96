/* What early_stopping and checkpoint share: the monitor, mode and min_delta
 * options, when the monitor is checked, what counts as better, and reading
 * the monitored value with an error that says what was expected. Static
 * inline so that each plugin stays one shared object that exports nothing
 * but its descriptor.
 *
 * A "val_*" monitor is checked at on_validation_end, when this epoch's
 * validation row has been logged; anything else at on_train_epoch_end,
 * where the latest value is the one of the epoch's last step row (there is
 * no epoch mean of a training metric). "test_*" metrics appear only after
 * training, so they cannot be monitored. */
#ifndef LOOPKIT_MONITOR_H
#define LOOPKIT_MONITOR_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

#define MONITOR_OPTIONS                                                        \
  {"monitor", LK_OPT_STRING, "val_loss",                                       \
   "the metrics.csv column watched: val_* (checked after each validation), "   \
   "or loss or a training metric (checked at each epoch's end, its last "      \
   "step's value)",                                                            \
   NULL},                                                                      \
  {                                                                            \
    "mode", LK_OPT_ENUM, "min", "min: lower is better; max: higher is better", \
        "min|max"                                                              \
  }

typedef struct monitor {
  char *name;
  bool max;           /* mode = max */
  bool at_validation; /* a val_* metric */
  double min_delta;   /* >= 0 */
} monitor;

static inline void monitor_free(monitor *m) {
  free(m->name);
  m->name = NULL;
}

/* Reads monitor and mode; min_delta is set by the caller that has it. */
static inline int monitor_init(monitor *m, lk_host *host, const lk_options *o) {
  const char *name = lk_opt_string(o, "monitor");
  memset(m, 0, sizeof *m);
  if (!name || !*name || strchr(name, ',') || strchr(name, '\n'))
    return lk_fail(host, LK_ECONFIG,
                   "option monitor = \"%s\": name a metrics.csv column such "
                   "as val_loss, loss or accuracy",
                   name ? name : "");
  if (strncmp(name, "test_", 5) == 0)
    return lk_fail(host, LK_ECONFIG,
                   "option monitor = %s: test metrics are logged after "
                   "training ends; watch val_* or a training metric",
                   name);
  size_t len = strlen(name) + 1;
  if (!(m->name = malloc(len)))
    return lk_fail(host, LK_ENOMEM, "out of memory");
  memcpy(m->name, name, len);
  m->max = strcmp(lk_opt_string(o, "mode"), "max") == 0;
  m->at_validation = strncmp(name, "val_", 4) == 0;
  return 0;
}

/* Whether CURRENT improves on BEST by more than min_delta (Lightning's
 * EarlyStopping). A non-finite value never does. */
static inline bool monitor_better(const monitor *m, double current,
                                  double best) {
  if (!isfinite(current))
    return false;
  return m->max ? current > best + m->min_delta : current < best - m->min_delta;
}

/* Appends ", NAME" to BUF (for the list of logged validation metrics). */
static inline void monitor_list_add(char *buf, size_t len, const char *name) {
  size_t used = strlen(buf);
  if (used < len)
    snprintf(buf + used, len - used, "%s%s", used ? ", " : "", name);
}

/* The monitored value, at the point where it is checked. VAL is the
 * validation's mean result at on_validation_end (it lists what was
 * logged), NULL at on_train_epoch_end. */
static inline int monitor_read(const monitor *m, lk_host *host,
                               const lk_step_result *val, double *value) {
  if (lk_host_metric(host, m->name, value) == 0)
    return 0;
  if (!val)
    return lk_fail(host, LK_ECONFIG,
                   "monitor %s was never logged: expected loss or a metric "
                   "that the model's training_step reports (or val_* for a "
                   "validation metric)",
                   m->name);
  char logged[512] = "";
  if (val->has_loss)
    monitor_list_add(logged, sizeof logged, "val_loss");
  for (size_t i = 0; i < val->n_metrics; i++) {
    char full[80];
    snprintf(full, sizeof full, "val_%s", val->metrics[i].name);
    monitor_list_add(logged, sizeof logged, full);
  }
  return lk_fail(host, LK_ECONFIG,
                 "monitor %s was never logged: the validation logged %s",
                 m->name, *logged ? logged : "nothing");
}

/* At on_train_end: a monitor that was never checked is worth a warning, as
 * a val_* monitor in a run without a validation split is. */
static inline void monitor_warn_unchecked(const monitor *m, lk_host *host,
                                          bool checked) {
  if (checked)
    return;
  if (m->at_validation)
    lk_log(host, LK_LOG_WARN,
           "%s was never checked: no validation ran (is there a validation "
           "split? is val_every_n_epochs more than max_epochs?)",
           m->name);
  else
    lk_log(host, LK_LOG_WARN,
           "%s was never checked: no training epoch ended (a run without a "
           "data plugin has no epochs)",
           m->name);
}

#endif

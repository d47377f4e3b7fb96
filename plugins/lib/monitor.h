/* What early_stopping and checkpoint share: the monitor, mode and min_delta
 * options, when the monitor is checked, what counts as better, and reading
 * the monitored value with an error that says what was expected.
 * Built once into plugins/lib/libplugincommon.la (monitor.c).
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
  /* The callback's check of the monitored value, VAL the validation's
   * result (NULL at an epoch's end); SELF the callback, whose struct
   * begins with its monitor. */
  int (*check)(void *self, const lk_step_result *val);
} monitor;

void monitor_free(monitor *m);

/* Reads monitor and mode, and keeps CHECK; min_delta is set by the caller
 * that has it. */
int monitor_init(monitor *m, lk_host *host, const lk_options *o,
                 int (*check)(void *self, const lk_step_result *val));

/* The hooks of a callback whose struct begins with its monitor, which both
 * callbacks share so that they check at the same points: a val_* metric
 * after each validation, any other at each epoch's end (Lightning's
 * rule), with the monitor's check. */
int monitor_on_validation_end(void *self, const lk_step_result *result);
int monitor_on_train_epoch_end(void *self, uint64_t epoch);

/* Whether CURRENT improves on BEST by more than min_delta (Lightning's
 * EarlyStopping). A non-finite value never does. */
bool monitor_better(const monitor *m, double current, double best);

/* The monitored value, at the point where it is checked. VAL is the
 * validation's mean result at on_validation_end (it lists what was
 * logged), NULL at on_train_epoch_end. */
int monitor_read(const monitor *m, lk_host *host, const lk_step_result *val,
                 double *value);

/* At on_train_end: a monitor that was never checked is worth a warning, as
 * a val_* monitor in a run without a validation split is. */
void monitor_warn_unchecked(const monitor *m, lk_host *host, bool checked);

#endif

/* lr_monitor: logs the optimizer's learning rate as the "lr" column of
 * metrics.csv, as Lightning's LearningRateMonitor: on every step row, or
 * on the first step row of each epoch. With a scheduler, which logs "lr"
 * itself, the column stays one column.
 *
 * The rate is read at on_train_batch_end, after the optimizer step and
 * before a step-interval scheduler changes it: the rate the step used.
 * With log_momentum, the "momentum" column too (beta1 for the adam family,
 * what onecycle and cyclic cycle), on the same rows; 0 for an optimizer
 * without one, with a warning, as Lightning does. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

#include "bundled.h"

typedef struct lr_monitor {
  lk_host *host;
  bool per_epoch;
  bool log_momentum;
  bool logged_once;
  uint64_t logged_epoch; /* the epoch of the last row logged per_epoch */
} lr_monitor;

static void destroy(void *self) {
  free(self);
}

static int create(lk_host *host, const lk_options *o, void **self) {
  if (!isfinite(lk_host_lr(host)))
    return lk_fail(host, LK_ECONFIG,
                   "the run's optimizer has no learning rate to monitor "
                   "(it does not implement get_lr)");
  lr_monitor *s = calloc(1, sizeof *s);
  if (!s)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  s->host = host;
  s->per_epoch = strcmp(lk_opt_string(o, "logging_interval"), "epoch") == 0;
  s->log_momentum = lk_opt_bool(o, "log_momentum");
  if (s->log_momentum && !isfinite(lk_host_momentum(host)))
    lk_log(host, LK_LOG_WARN,
           "log_momentum = true, but the optimizer has no momentum: the "
           "momentum column is 0");
  *self = s;
  return 0;
}

/* Without a data plugin the whole run is epoch 0: one row gets the rate. A
 * batch inside an accumulation window writes no row; the value waits for
 * the window's row. */
static int on_train_batch_end(void *self, const lk_step_result *result) {
  lr_monitor *s = self;
  (void)result;
  if (s->per_epoch) {
    uint64_t epoch;
    lk_host_progress(s->host, &epoch, NULL);
    if (s->logged_once && epoch == s->logged_epoch)
      return 0;
    s->logged_once = true;
    s->logged_epoch = epoch;
  }
  int rc = lk_host_log_metric(s->host, "lr", lk_host_lr(s->host));
  if (rc != 0 || !s->log_momentum)
    return rc;
  double momentum = lk_host_momentum(s->host);
  return lk_host_log_metric(s->host, "momentum",
                            isfinite(momentum) ? momentum : 0);
}

static const lk_option options[] = {
    {"logging_interval", LK_OPT_ENUM, "step",
     "step: the rate on every step row; epoch: on the first step row of each "
     "epoch",
     "step|epoch"},
    {"log_momentum", LK_OPT_BOOL, "false",
     "also log the momentum (beta1 for the adam family) as the momentum "
     "column; 0 for an optimizer without one",
     NULL},
    {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor =
    BUNDLED_CALLBACK("lr_monitor",
                     "logs the learning rate to metrics.csv, as Lightning's "
                     "LearningRateMonitor",
                     destroy, NULL, .on_train_batch_end = on_train_batch_end);

/* early_stopping: stops training when a monitored metric has stopped
 * improving, as Lightning's EarlyStopping: a check that does not improve on
 * the best value by more than min_delta adds one to a wait count, an
 * improvement resets it, and `patience` checks in a row without one stop
 * the run after the current epoch. With check_finite, a NaN or infinite
 * value stops the run at once; without it, such a value is never an
 * improvement.
 *
 * When the monitor is checked is in monitor.h. The best value, the wait
 * count and whether there is a best are host state, so a resumed run
 * continues the count. */
#include <stdint.h>

#include "bundled.h"
#include "monitor.h"

typedef struct early_stopping {
  monitor m; /* first: monitor_on_validation_end and the like find it */
  lk_host *host;
  int64_t patience;
  bool check_finite;
  lk_tensor *best, *has_best, *wait, *checks; /* f64[1] each */
} early_stopping;

/* The monitor's check (monitor.h), below. */
static int check(void *self, const lk_step_result *val);

static void destroy(void *self) {
  early_stopping *s = self;
  monitor_free(&s->m);
  free(s);
}

static int add_scalar(lk_host *host, const char *name, lk_tensor **out) {
  size_t one = 1;
  int rc = lk_host_add_state(host, name, LK_F64, 1, &one, out);
  if (rc == 0)
    *(double *)(*out)->data = 0;
  return rc;
}

static int create(lk_host *host, const lk_options *o, void **self) {
  int rc;
  early_stopping *s = calloc(1, sizeof *s);
  if (!s)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  s->host = host;
  if ((rc = monitor_init(&s->m, host, o, check)) != 0) {
    free(s);
    return rc;
  }
  s->m.min_delta = lk_opt_double(o, "min_delta");
  s->patience = lk_opt_int(o, "patience");
  s->check_finite = lk_opt_bool(o, "check_finite");
  if ((rc = add_scalar(host, "best", &s->best)) != 0 ||
      (rc = add_scalar(host, "has_best", &s->has_best)) != 0 ||
      (rc = add_scalar(host, "wait", &s->wait)) != 0 ||
      (rc = add_scalar(host, "checks", &s->checks)) != 0) {
    destroy(s);
    return rc;
  }
  *self = s;
  return 0;
}

static double get(const lk_tensor *t) {
  return *(const double *)t->data;
}

static void set(lk_tensor *t, double v) {
  *(double *)t->data = v;
}

static unsigned long long epoch_now(lk_host *host) {
  uint64_t epoch;
  lk_host_progress(host, &epoch, NULL);
  return (unsigned long long)epoch;
}

static int check(void *self, const lk_step_result *val) {
  early_stopping *s = self;
  double current;
  int rc = monitor_read(&s->m, s->host, val, &current);
  if (rc != 0)
    return rc;
  set(s->checks, get(s->checks) + 1);
  bool has_best = get(s->has_best) != 0;
  if (!isfinite(current) && s->check_finite) {
    if (has_best)
      lk_log(s->host, LK_LOG_INFO,
             "%s = %g is not finite; best %.6g; stopping at epoch %llu",
             s->m.name, current, get(s->best), epoch_now(s->host));
    else
      lk_log(s->host, LK_LOG_INFO,
             "%s = %g is not finite; stopping at epoch %llu", s->m.name,
             current, epoch_now(s->host));
    lk_host_request_stop(s->host);
    return 0;
  }
  if (isfinite(current) &&
      (!has_best || monitor_better(&s->m, current, get(s->best)))) {
    set(s->best, current);
    set(s->has_best, 1);
    set(s->wait, 0);
    lk_log(s->host, LK_LOG_DEBUG, "%s improved to %.6g", s->m.name, current);
    return 0;
  }
  set(s->wait, get(s->wait) + 1);
  if (get(s->wait) < (double)s->patience)
    return 0;
  if (has_best)
    lk_log(s->host, LK_LOG_INFO,
           "%s did not improve by more than %g for %.0f checks; best %.6g; "
           "stopping at epoch %llu",
           s->m.name, s->m.min_delta, get(s->wait), get(s->best),
           epoch_now(s->host));
  else
    lk_log(s->host, LK_LOG_INFO,
           "%s was not finite for %.0f checks; stopping at epoch %llu",
           s->m.name, get(s->wait), epoch_now(s->host));
  lk_host_request_stop(s->host);
  return 0;
}

/* A checkpoint's values: a flag and two counts. */
static int check_state(void *self) {
  early_stopping *s = self;
  int rc = lk_state_check(s->host, s->has_best, 0, 1, true);
  if (rc == 0)
    rc = lk_state_check(s->host, s->wait, 0, LK_STATE_MAX_COUNT, true);
  if (rc == 0)
    rc = lk_state_check(s->host, s->checks, 0, LK_STATE_MAX_COUNT, true);
  return rc;
}

static int on_train_end(void *self) {
  early_stopping *s = self;
  monitor_warn_unchecked(&s->m, s->host, get(s->checks) > 0);
  return 0;
}

static const lk_option options[] = {
    MONITOR_OPTIONS,
    {"patience", LK_OPT_INT, "3",
     "checks in a row without improvement after which training stops",
     "[1, inf)"},
    {"min_delta", LK_OPT_DOUBLE, "0", "an improvement must be larger than this",
     "[0, inf)"},
    {"check_finite", LK_OPT_BOOL, "true",
     "stop at once when the monitor is NaN or infinite", NULL},
    {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_CALLBACK(
    "early_stopping",
    "stops training when a monitored metric stops improving, as "
    "Lightning's EarlyStopping",
    destroy, check_state, .on_validation_end = monitor_on_validation_end,
    .on_train_epoch_end = monitor_on_train_epoch_end,
    .on_train_end = on_train_end);

/* reduce_on_plateau: divides the learning rate when a monitored metric has
 * stopped improving, as torch.optim.lr_scheduler.ReduceLROnPlateau 1.13:
 * after more than `patience` intervals without an improvement by more than
 * `threshold` (relative or absolute), lr = max(lr * factor, min_lr) unless
 * that changes it by eps or less; then `cooldown` intervals are not counted.
 *
 * The monitor is read from the metrics the host passes at this scheduler's
 * interval: "loss" and the step's metrics after an optimizer step, the
 * epoch's mean "loss" and "val_*" after an epoch. A monitor that is not
 * there is an error, not a silent no-op. */
#include <stdlib.h>
#include <string.h>

#include "bundled.h"
#include "scheduler_common.h"

typedef struct plateau {
  sched_common c;
  char *monitor;
  bool max; /* mode = max */
  bool rel; /* threshold_mode = rel */
  double factor, threshold, min_lr, eps;
  int64_t patience, cooldown;
  /* Host state. best is torch's best; best_inf is -1 or +1 when torch's is
   * -inf or +inf (its mode_worse at the start), since a checkpoint holds
   * finite numbers only. */
  lk_tensor *best, *best_inf, *num_bad_epochs, *cooldown_counter;
} plateau;

static void destroy(void *self) {
  plateau *s = self;
  free(s->monitor);
  free(s);
}

/* The host has checked the ranges (and that factor < 1 before create, as
 * torch's ValueError does); a range cannot say "not empty". */
static int create(lk_host *host, const lk_options *o, void **self) {
  const char *monitor = lk_opt_string(o, "monitor");
  if (!monitor || !*monitor)
    return lk_fail(host, LK_ECONFIG,
                   "option monitor is empty: name a metric such as val_loss");
  /* torch's constructor does not step: the rate stays as it is. */
  void *mem = NULL;
  int rc = sched_new(host, o, sizeof(plateau), &mem);
  if (rc != 0)
    return rc;
  plateau *s = mem;
  size_t one = 1;
  if (!(s->monitor = strdup(monitor))) {
    free(s);
    return lk_fail(host, LK_ENOMEM, "out of memory");
  }
  s->max = strcmp(lk_opt_string(o, "mode"), "max") == 0;
  s->rel = strcmp(lk_opt_string(o, "threshold_mode"), "rel") == 0;
  s->factor = lk_opt_double(o, "factor");
  s->threshold = lk_opt_double(o, "threshold");
  s->min_lr = lk_opt_double(o, "min_lr");
  s->eps = lk_opt_double(o, "eps");
  s->patience = lk_opt_int(o, "patience");
  s->cooldown = lk_opt_int(o, "cooldown");
  if ((rc = lk_host_add_state(host, "best", LK_F64, 1, &one, &s->best)) != 0 ||
      (rc = lk_host_add_state(host, "best_inf", LK_F64, 1, &one,
                              &s->best_inf)) != 0 ||
      (rc = lk_host_add_state(host, "num_bad_epochs", LK_F64, 1, &one,
                              &s->num_bad_epochs)) != 0 ||
      (rc = lk_host_add_state(host, "cooldown_counter", LK_F64, 1, &one,
                              &s->cooldown_counter)) != 0) {
    destroy(s);
    return rc;
  }
  /* _reset(): best = mode_worse, no bad epochs, no cooldown. */
  *(double *)s->best->data = 0;
  *(double *)s->best_inf->data = s->max ? -1 : 1;
  *(double *)s->num_bad_epochs->data = 0;
  *(double *)s->cooldown_counter->data = 0;
  *self = s;
  return 0;
}

static double get_best(const plateau *s) {
  double inf = *(const double *)s->best_inf->data;
  return inf > 0   ? INFINITY
         : inf < 0 ? -INFINITY
                   : *(const double *)s->best->data;
}

static void set_best(plateau *s, double v) {
  *(double *)s->best_inf->data = isinf(v) ? (v > 0 ? 1 : -1) : 0;
  *(double *)s->best->data = isinf(v) ? 0 : v;
}

/* A checkpoint's values: counters, and best_inf one of -1, 0, 1. */
static int check_state(void *self) {
  plateau *s = self;
  lk_host *h = s->c.host;
  int rc = sched_check_state(&s->c);
  if (rc == 0)
    rc = lk_state_check(h, s->best_inf, -1, 1, true);
  if (rc == 0)
    rc = lk_state_check(h, s->num_bad_epochs, 0, LK_STATE_MAX_COUNT, true);
  if (rc == 0)
    rc = lk_state_check(h, s->cooldown_counter, 0, (double)s->cooldown, true);
  return rc;
}

/* torch's is_better, operation for operation. */
static bool is_better(const plateau *s, double a, double best) {
  if (!s->max && s->rel)
    return a < best * (1. - s->threshold);
  if (!s->max)
    return a < best - s->threshold;
  if (s->rel)
    return a > best * (s->threshold + 1.);
  return a > best + s->threshold;
}

static int step(void *self, lk_interval when, const lk_metric *metrics,
                size_t n) {
  plateau *s = self;
  if (!sched_mine(&s->c, when))
    return 0;
  double current;
  if (!sched_metric(metrics, n, s->monitor, &current))
    return sched_missing_metric(&s->c, when, "monitor", s->monitor, metrics, n);
  sched_advance(&s->c);
  double *bad = s->num_bad_epochs->data, *cool = s->cooldown_counter->data;
  if (is_better(s, current, get_best(s))) {
    set_best(s, current);
    *bad = 0;
  } else {
    *bad += 1;
  }
  if (*cool > 0) {
    *cool -= 1;
    *bad = 0; /* bad intervals in cooldown do not count */
  }
  if (*bad > (double)s->patience) {
    double old_lr = sched_lr(&s->c);
    double new_lr = old_lr * s->factor;
    if (new_lr < s->min_lr)
      new_lr = s->min_lr;
    if (old_lr - new_lr > s->eps) {
      int rc = sched_set_lr(&s->c, new_lr);
      if (rc != 0)
        return rc;
    }
    *cool = (double)s->cooldown;
    *bad = 0;
  }
  return 0;
}

static const lk_option options[] = {
    {"monitor", LK_OPT_STRING, "val_loss",
     "the metric watched: loss or a step metric at interval = step; loss "
     "(the epoch's mean) or val_* at interval = epoch",
     NULL},
    {"mode", LK_OPT_ENUM, "min",
     "min: reduce when the monitor stops decreasing; max: stops increasing",
     "min|max"},
    {"factor", LK_OPT_DOUBLE, "0.1",
     "new lr = lr * factor (< 1: torch's ValueError; a learning rate is never "
     "negative)",
     "[0, 1)"},
    {"patience", LK_OPT_INT, "10",
     "intervals without improvement tolerated before a reduction", "[0, inf)"},
    /* A negative threshold (a tolerance) is odd but torch allows it. */
    {"threshold", LK_OPT_DOUBLE, "1e-4",
     "how much better counts as an improvement", NULL},
    {"threshold_mode", LK_OPT_ENUM, "rel",
     "rel: better than best * (1 -/+ threshold); abs: best -/+ threshold",
     "rel|abs"},
    {"cooldown", LK_OPT_INT, "0",
     "intervals after a reduction in which nothing is counted", "[0, inf)"},
    {"min_lr", LK_OPT_DOUBLE, "0", "lower bound of the learning rate",
     "[0, inf)"},
    {"eps", LK_OPT_DOUBLE, "1e-8", "a reduction by eps or less is not made",
     "[0, inf)"},
    SCHED_INTERVAL_OPTION,
    {NULL, 0, NULL, NULL, NULL}};

static const lk_scheduler_ops scheduler_ops = {.step = step};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_SCHEDULER(
    "reduce_on_plateau",
    "reduces the learning rate when a metric stops improving, as "
    "torch's ReduceLROnPlateau",
    destroy, check_state, &scheduler_ops);

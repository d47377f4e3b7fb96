/* What the learning-rate scheduler plugins share: the interval option, the
 * state every one keeps (torch's last_epoch and base_lr), the start of
 * create and of step, and metric look-ups. Static inline so that each
 * plugin stays one shared object that exports nothing but its descriptor.
 *
 * The schedulers reproduce torch.optim.lr_scheduler 1.13's recursive
 * ("chainable") get_lr: each new rate is computed from the optimizer's
 * current one, read with lk_host_lr, in the same operations and order as
 * torch's Python floats (compile with -ffp-contract=off: nothing is fused).
 * Everything a step depends on is host state, so a resumed run continues
 * the schedule exactly. */
#ifndef LOOPKIT_SCHEDULER_COMMON_H
#define LOOPKIT_SCHEDULER_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

/* Python's math.pi (M_PI is not C11). */
#define SCHED_PI 3.14159265358979323846

#define SCHED_INTERVAL_OPTION                                                  \
  {                                                                            \
    "interval", LK_OPT_ENUM, "epoch",                                          \
        "when the rate changes: after every optimizer step, or after every "   \
        "epoch and its validation",                                            \
        "step|epoch"                                                           \
  }

typedef struct sched_common {
  lk_host *host;
  lk_interval interval;
  lk_tensor *last_epoch; /* [1]: torch's last_epoch, step() calls so far */
  lk_tensor *base_lr;    /* [1]: the optimizer's rate at create (initial_lr) */
} sched_common;

/* The interval an interval option names. */
static inline lk_interval sched_interval(const lk_options *o) {
  const char *interval = lk_opt_string(o, "interval");
  return interval && strcmp(interval, "step") == 0 ? LK_INTERVAL_STEP
                                                   : LK_INTERVAL_EPOCH;
}

/* Reads the interval and adds the common state: last_epoch = 0 and base_lr
 * = torch's initial_lr (the optimizer's rate before the first scheduler
 * changed it: the rate now, unless this is the child of a composite whose
 * earlier children did), as torch's constructor leaves them after its
 * initial step. */
static inline int sched_init(sched_common *c, lk_host *host,
                             const lk_options *o) {
  c->host = host;
  c->interval = sched_interval(o);
  double lr = lk_host_initial_lr(host);
  if (!isfinite(lr))
    return lk_fail(host, LK_ECONFIG,
                   "the optimizer has no learning rate to schedule");
  size_t one = 1;
  int rc =
      lk_host_add_state(host, "last_epoch", LK_F64, 1, &one, &c->last_epoch);
  if (rc == 0)
    rc = lk_host_add_state(host, "base_lr", LK_F64, 1, &one, &c->base_lr);
  if (rc != 0)
    return rc;
  *(double *)c->last_epoch->data = 0;
  *(double *)c->base_lr->data = lr;
  return 0;
}

/* The start of create: *OUT gets a zeroed struct of SIZE bytes that begins
 * with a sched_common, set up by sched_init. The options' ranges are
 * declared in the option tables and enforced by the host (ABI 1.4). The
 * struct is freed with free(): a scheduler with nothing else to free has
 * .destroy = free. */
static inline int sched_new(lk_host *host, const lk_options *o, size_t size,
                            void **out) {
  sched_common *c = calloc(1, size);
  if (!c)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  int rc = sched_init(c, host, o);
  if (rc != 0) {
    free(c);
    return rc;
  }
  *out = c;
  return 0;
}

/* A checkpoint's values of the common state: torch's step count and the
 * initial rate. SELF starts with a sched_common (every scheduler's first
 * member), so that this is check_state for those with no state of their
 * own. */
static inline int sched_check_state(void *self) {
  sched_common *c = self;
  int rc = lk_state_check(c->host, c->last_epoch, 0, LK_STATE_MAX_COUNT, true);
  return rc ? rc : lk_state_check(c->host, c->base_lr, 0, 1e308, false);
}

/* Whether a step() call is for this scheduler's interval. */
static inline bool sched_mine(const sched_common *c, lk_interval when) {
  return when == c->interval;
}

/* torch's `self.last_epoch += 1`; the new value. */
static inline int64_t sched_advance(sched_common *c) {
  double *e = c->last_epoch->data;
  *e += 1;
  return (int64_t)*e;
}

/* The start of step for a scheduler that needs no metric: false when WHEN
 * is not its interval; otherwise torch's `self.last_epoch += 1`, the new
 * value in *EPOCH. */
static inline bool sched_tick(sched_common *c, lk_interval when,
                              int64_t *epoch) {
  if (!sched_mine(c, when))
    return false;
  *epoch = sched_advance(c);
  return true;
}

/* torch's last_epoch = 0 of a restart (lk_scheduler_ops.restart). */
static inline void sched_rewind(sched_common *c) {
  *(double *)c->last_epoch->data = 0;
}

static inline double sched_base_lr(const sched_common *c) {
  return *(const double *)c->base_lr->data;
}

static inline double sched_lr(const sched_common *c) {
  return lk_host_lr(c->host);
}

/* The host's message names the plugin and the refused rate. */
static inline int sched_set_lr(sched_common *c, double lr) {
  return lk_host_set_lr(c->host, lr);
}

static inline const char *sched_interval_name(lk_interval when) {
  return when == LK_INTERVAL_STEP ? "an optimizer step" : "an epoch";
}

/* The value of metric NAME among METRICS; false if it is not there. */
static inline bool sched_metric(const lk_metric *metrics, size_t n,
                                const char *name, double *value) {
  for (size_t i = 0; i < n; i++)
    if (metrics[i].name && strcmp(metrics[i].name, name) == 0) {
      *value = metrics[i].value;
      return true;
    }
  return false;
}

/* Fails naming the metric that is missing and those that were there. */
static inline int sched_missing_metric(const sched_common *c, lk_interval when,
                                       const char *option, const char *name,
                                       const lk_metric *metrics, size_t n) {
  char have[512] = "none";
  size_t used = 0;
  for (size_t i = 0; i < n && used < sizeof have; i++)
    used += (size_t)snprintf(have + used, sizeof have - used, "%s%s",
                             i ? ", " : "", metrics[i].name);
  return lk_fail(c->host, LK_EPLUGIN,
                 "%s = %s: no such metric after %s (available: %s)", option,
                 name, sched_interval_name(when), have);
}

/* For cycle_momentum: torch's ValueError when the optimizer has no
 * momentum (lk_host_momentum is NaN: no get_momentum/set_momentum). */
static inline int sched_need_momentum(lk_host *host) {
  if (isfinite(lk_host_momentum(host)))
    return 0;
  return lk_fail(host, LK_ECONFIG,
                 "optimizer must support momentum with `cycle_momentum` "
                 "option enabled (torch's ValueError): this optimizer has no "
                 "momentum or betas; set cycle_momentum = false");
}

/* Option NAME, a comma list of whole numbers >= MIN (torch's list of
 * ints: milestones), into *OUT (malloc'd: free it; NULL when empty) and
 * *N; with INCREASING each must be larger than the one before. A value
 * the list's declared range cannot refuse fails naming where the config
 * gives it. */
static inline int sched_int_list(lk_host *host, const lk_options *o,
                                 const char *name, int64_t min, bool increasing,
                                 int64_t **out, size_t *n) {
  size_t len;
  const double *v = lk_opt_doubles(o, name, &len);
  *out = NULL;
  *n = 0;
  if (len == 0)
    return 0;
  int64_t *list = malloc(len * sizeof *list);
  if (!list)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  for (size_t i = 0; i < len; i++) {
    const char *why = NULL;
    if (!(v[i] == floor(v[i]) && v[i] >= (double)min &&
          v[i] <= LK_STATE_MAX_COUNT))
      why = "a whole number";
    else if (increasing && i > 0 && (int64_t)v[i] <= list[i - 1])
      why = "larger than the one before";
    if (why) {
      int rc =
          lk_fail(host, LK_ECONFIG,
                  "%s: option %s.%s = %s: value %zu (%.17g) must be %s "
                  "(%s of whole numbers >= %lld)",
                  lk_opt_where(o, name), lk_host_name(host), name,
                  lk_opt_string(o, name), i + 1, v[i], why,
                  increasing ? "an increasing list" : "a list", (long long)min);
      free(list);
      return rc;
    }
    list[i] = (int64_t)v[i];
  }
  *out = list;
  *n = len;
  return 0;
}

#endif

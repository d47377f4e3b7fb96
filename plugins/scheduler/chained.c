/* chained: several schedulers stepped one after the other at every step,
 * as torch.optim.lr_scheduler.ChainedScheduler 1.13: each applies its
 * recursive form to the rate the one before left, so that their factors
 * multiply (a warm-up inside an exponential decay, say). The schedulers are
 * named instances, created in the order listed (their constructors' steps
 * apply in that order, as torch's do) and checkpointed under their names:
 *
 *   [plugins]
 *   scheduler = chained
 *   [chained]
 *   schedulers = warm:constant, decay:exponential
 *   [warm]
 *   factor = 0.1
 *   [decay]
 *   gamma = 0.9
 *
 * Each steps at this scheduler's interval. Unlike torch 1.13, whose
 * ChainedScheduler calls step() without a metric, loopkit passes each one
 * the metrics, so reduce_on_plateau can be one. */
#include <stdlib.h>

#include "bundled.h"
#include "sched_compose.h"
#include "scheduler_common.h"

typedef struct chained {
  lk_host *host;
  lk_interval interval;
  lk_scheduler **children;
  size_t n;
} chained;

static void destroy(void *self) {
  chained *s = self;
  free(s->children);
  free(s);
}

static int create(lk_host *host, const lk_options *o, void **self) {
  chained *s = calloc(1, sizeof *s);
  if (!s)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  s->host = host;
  s->interval = sched_interval(o);
  char **names = NULL;
  int rc = compose_names(host, o, "schedulers", &names, &s->n);
  if (rc == 0) {
    rc = compose_children(host, names, s->n, &s->children);
    free(names);
  }
  if (rc != 0) {
    free(s);
    return rc;
  }
  *self = s;
  return 0;
}

static int step(void *self, lk_interval when, const lk_metric *metrics,
                size_t n) {
  chained *s = self;
  for (size_t i = 0; when == s->interval && i < s->n; i++) {
    int rc = lk_scheduler_step(s->children[i], when, metrics, n);
    if (rc != 0)
      return rc;
  }
  return 0;
}

/* A checkpoint's children: chained steps every one at every step, so
 * their step counts are equal (each child's own range was checked
 * first). */
static int check_state(void *self) {
  chained *s = self;
  const lk_tensor *first = NULL, *t;
  double e0 = 0, e;
  for (size_t i = 0; i < s->n; i++) {
    if (!compose_last_epoch(s->children[i], &e, &t))
      continue;
    if (!first) {
      first = t;
      e0 = e;
    } else if (e != e0) {
      return lk_fail(s->host, LK_EFORMAT,
                     "state %s[0] = %.17g is out of step with %s[0] = %.17g: "
                     "chained steps all its schedulers at every step, so "
                     "their last_epoch are equal",
                     t->name, e, first->name, e0);
    }
  }
  return 0;
}

static const lk_option options[] = {
    {"schedulers", LK_OPT_STRING, NULL,
     "list of chained schedulers, as named instances NAME:PLUGIN (options "
     "under [NAME]), comma separated: e.g. warm:constant, decay:exponential",
     NULL},
    SCHED_INTERVAL_OPTION,
    {NULL, 0, NULL, NULL, NULL}};

static const lk_scheduler_ops scheduler_ops = {.step = step};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_SCHEDULER(
    "chained",
    "steps several schedulers one after the other, as torch's "
    "ChainedScheduler",
    destroy, check_state, &scheduler_ops);

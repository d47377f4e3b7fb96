/* constant: multiplies the learning rate by factor until the step or epoch
 * count reaches total_iters, then gives the factor back, as
 * torch.optim.lr_scheduler.ConstantLR 1.13 with its recursive form (lr *
 * factor at the start, lr * (1 / factor) at total_iters, from the rate
 * then). */
#include <stdlib.h>

#include "bundled.h"
#include "scheduler_common.h"

typedef struct constant {
  sched_common c;
  double factor;
  int64_t total_iters;
} constant;

static const lk_option options[] = {
    /* torch takes factor = 0 and divides by it at total_iters; loopkit
     * refuses it. */
    {"factor", LK_OPT_DOUBLE, "0.3333333333333333",
     "the number we multiply learning rate until the milestone (torch's 1/3)",
     "(0, 1]"},
    {"total_iters", LK_OPT_INT, "5",
     "the number of steps that the scheduler decays the learning rate (epochs "
     "at interval = epoch; auto: the run's, or the part of its parent's a "
     "child runs)",
     "[0, inf) or auto"},
    SCHED_INTERVAL_OPTION,
    {NULL, 0, NULL, NULL, NULL}};

/* torch's recursive get_lr at last_epoch E. */
static int apply(void *self, int64_t e) {
  constant *s = self;
  if (e == 0)
    return sched_set_lr(&s->c, sched_lr(&s->c) * s->factor);
  if (e != s->total_iters)
    return 0;
  return sched_set_lr(&s->c, sched_lr(&s->c) * (1.0 / s->factor));
}

/* torch's step(0): base_lr * (factor + (0 >= total_iters) * (1 - factor)),
 * where a false comparison is 0. */
static double closed(void *self) {
  constant *s = self;
  double f = s->factor, past = 0 >= s->total_iters ? 1 - f : 0.;
  return sched_base_lr(&s->c) * (f + past);
}

/* torch's initial step: lr * factor. */

/* torch's initial step: lr * factor. */
static const sched_kind kind = {
    .size = sizeof(constant),
    .fields = {SCHED_FIELD(constant, factor, "factor", DOUBLE),
               SCHED_FIELD(constant, total_iters, "total_iters", INT)},
    .apply = apply,
    .closed = closed};

BUNDLED_SCHEDULER_OF(kind, "constant",
                     "multiplies the learning rate by a constant factor until "
                     "total_iters, as torch's ConstantLR",
                     sched_check_state);

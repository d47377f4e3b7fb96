/* linear_warmup: scales the learning rate linearly from start_factor to
 * end_factor times its initial value over total_iters steps or epochs, then
 * leaves it, as torch.optim.lr_scheduler.LinearLR 1.13 (whose recursive
 * ratio form is reproduced, not its closed form). With the defaults it is a
 * warm-up; with end_factor < start_factor, a linear decay. */
#include <stdlib.h>

#include "bundled.h"
#include "scheduler_common.h"

typedef struct linear_warmup {
  sched_common c;
  double start, end;
  int64_t total_iters;
} linear_warmup;

static const lk_option options[] = {
    /* torch accepts start_factor = 0 and then divides by zero at the first
     * step; loopkit refuses it. */
    {"start_factor", LK_OPT_DOUBLE, "0.3333333333333333",
     "factor of the initial rate at the start (torch's 1/3)", "(0, 1]"},
    {"end_factor", LK_OPT_DOUBLE, "1.0",
     "factor of the initial rate after total_iters", "[0, 1]"},
    {"total_iters", LK_OPT_INT, "5",
     "intervals from start_factor to end_factor (auto: the run's optimizer "
     "steps, or epochs at interval = epoch, or the part of its parent's a "
     "child runs: up to its milestone in a sequential)",
     "[1, inf) or auto"},
    SCHED_INTERVAL_OPTION,
    {NULL, 0, NULL, NULL, NULL}};

/* torch's initial step: lr * start_factor, from the rate now. */
static int apply(void *self, int64_t e) {
  linear_warmup *s = self;
  if (e == 0)
    return sched_set_lr(&s->c, sched_lr(&s->c) * s->start);
  if (e > s->total_iters)
    return 0;
  double d = s->end - s->start;
  double ratio =
      1. + d / ((double)s->total_iters * s->start + (double)(e - 1) * d);
  return sched_set_lr(&s->c, sched_lr(&s->c) * ratio);
}

/* torch's step(0): the closed form, base_lr * (start_factor + (end_factor -
 * start_factor) * min(total_iters, 0) / total_iters). */
static double closed(void *self) {
  linear_warmup *s = self;
  double t = (double)s->total_iters;
  return sched_base_lr(&s->c) * (s->start + (s->end - s->start) * 0. / t);
}

static const sched_kind kind = {
    .size = sizeof(linear_warmup),
    .fields = {SCHED_FIELD(linear_warmup, start, "start_factor", DOUBLE),
               SCHED_FIELD(linear_warmup, end, "end_factor", DOUBLE),
               SCHED_FIELD(linear_warmup, total_iters, "total_iters", INT)},
    .apply = apply,
    .closed = closed};

BUNDLED_SCHEDULER_OF(kind, "linear_warmup",
                     "linear change of the learning rate over total_iters (a "
                     "warm-up), as torch's LinearLR",
                     sched_check_state);

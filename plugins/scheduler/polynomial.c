/* polynomial: decays the learning rate to 0 over total_iters steps or
 * epochs along (1 - t / total_iters) ** power, as
 * torch.optim.lr_scheduler.PolynomialLR 1.13 with its recursive form: each
 * step multiplies the rate now by ((1 - e / T) / (1 - (e - 1) / T)) **
 * power; past total_iters the rate stays. */
#include <stdlib.h>

#include "bundled.h"
#include "scheduler_common.h"

typedef struct polynomial {
  sched_common c;
  int64_t total_iters;
  double power;
} polynomial;

static const lk_option options[] = {
    /* torch's closed form divides by total_iters: 0 is refused. */
    {"total_iters", LK_OPT_INT, "5",
     "the number of steps that the scheduler decays the learning rate (epochs "
     "at interval = epoch; auto: the run's, or the part of its parent's a "
     "child runs)",
     "[1, inf) or auto"},
    {"power", LK_OPT_DOUBLE, "1.0",
     "the power of the polynomial (a negative one would divide by zero at "
     "total_iters)",
     "[0, inf)"},
    SCHED_INTERVAL_OPTION,
    {NULL, 0, NULL, NULL, NULL}};

/* torch's initial step leaves the rate as it is. */
static int apply(void *self, int64_t e) {
  polynomial *s = self;
  if (e == 0 || e > s->total_iters)
    return 0;
  double t = (double)s->total_iters;
  double decay =
      pow((1.0 - (double)e / t) / (1.0 - (double)(e - 1) / t), s->power);
  return sched_set_lr(&s->c, sched_lr(&s->c) * decay);
}

/* torch's step(0): base_lr * (1.0 - min(total_iters, 0) / total_iters) **
 * power. */
static double closed(void *self) {
  polynomial *s = self;
  double t = (double)s->total_iters;
  return sched_base_lr(&s->c) * pow(1.0 - 0. / t, s->power);
}

static const sched_kind kind = {
    .size = sizeof(polynomial),
    .fields = {SCHED_FIELD(polynomial, total_iters, "total_iters", INT),
               SCHED_FIELD(polynomial, power, "power", DOUBLE)},
    .apply = apply,
    .closed = closed};

BUNDLED_SCHEDULER_OF(
    kind, "polynomial",
    "decays the learning rate along a polynomial over total_iters, "
    "as torch's PolynomialLR",
    sched_check_state);

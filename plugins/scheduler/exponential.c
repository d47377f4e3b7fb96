/* exponential: multiplies the learning rate by gamma every step or epoch,
 * as torch.optim.lr_scheduler.ExponentialLR 1.13 with its recursive form
 * (lr * gamma from the rate now), so that a rate changed by someone else
 * between steps (a composite's other scheduler) is decayed from there. */
#include <stdlib.h>

#include "bundled.h"
#include "scheduler_common.h"

typedef struct exponential {
  sched_common c;
  double gamma;
} exponential;

static const lk_option options[] = {
    {"gamma", LK_OPT_DOUBLE, NULL,
     "multiplicative factor of learning rate decay (a learning rate is never "
     "negative)",
     "[0, inf)"},
    SCHED_INTERVAL_OPTION,
    {NULL, 0, NULL, NULL, NULL}};

/* torch's initial step leaves the rate as it is. */
static int apply(void *self, int64_t e) {
  exponential *s = self;
  return e == 0 ? 0 : sched_set_lr(&s->c, sched_lr(&s->c) * s->gamma);
}

/* torch's step(0): the closed form base_lr * gamma ** 0. */
static double closed(void *self) {
  exponential *s = self;
  return sched_base_lr(&s->c) * pow(s->gamma, 0.);
}

static const sched_kind kind = {
    .size = sizeof(exponential),
    .fields = {SCHED_FIELD(exponential, gamma, "gamma", DOUBLE)},
    .apply = apply,
    .closed = closed};

BUNDLED_SCHEDULER_OF(
    kind, "exponential",
    "decays the learning rate by gamma every step or epoch, as "
    "torch's ExponentialLR",
    sched_check_state);

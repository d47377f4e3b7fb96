/* step_lr: multiplies the learning rate by gamma every step_size steps or
 * epochs, as torch.optim.lr_scheduler.StepLR 1.13 with its recursive form:
 * `lr * gamma` whenever last_epoch is a multiple of step_size, so that a
 * rate changed by someone else between steps is decayed from there. */
#include <stdlib.h>

#include "bundled.h"
#include "scheduler_common.h"

typedef struct step_lr {
  sched_common c;
  int64_t step_size;
  double gamma;
} step_lr;

static const lk_option options[] = {
    {"step_size", LK_OPT_INT, NULL, "period of the decay, in intervals",
     "[1, inf)"},
    {"gamma", LK_OPT_DOUBLE, "0.1",
     "multiplicative factor of the decay (a learning rate is never negative)",
     "[0, inf)"},
    SCHED_INTERVAL_OPTION,
    {NULL, 0, NULL, NULL, NULL}};

/* torch's initial step leaves the rate as it is. */
static int apply(void *self, int64_t e) {
  step_lr *s = self;
  if (e == 0 || e % s->step_size != 0)
    return 0;
  return sched_set_lr(&s->c, sched_lr(&s->c) * s->gamma);
}

/* torch's step(0) is the closed form base_lr * gamma ** (0 // step_size),
 * base_lr itself. */
static double closed(void *self) {
  step_lr *s = self;
  return sched_base_lr(&s->c) * pow(s->gamma, 0.);
}

static const sched_kind kind = {
    .size = sizeof(step_lr),
    .fields = {SCHED_FIELD(step_lr, step_size, "step_size", INT),
               SCHED_FIELD(step_lr, gamma, "gamma", DOUBLE)},
    .apply = apply,
    .closed = closed};

BUNDLED_SCHEDULER_OF(
    kind, "step_lr",
    "decays the learning rate by gamma every step_size steps or "
    "epochs, as torch's StepLR",
    sched_check_state);

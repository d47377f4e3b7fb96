/* exponential: multiplies the learning rate by gamma every step or epoch,
 * as torch.optim.lr_scheduler.ExponentialLR 1.13 with its recursive form
 * (lr * gamma from the rate now), so that a rate changed by someone else
 * between steps (a composite's other scheduler) is decayed from there. */
#include <stdlib.h>

#include "scheduler_common.h"

typedef struct exponential {
  sched_common c;
  double gamma;
} exponential;

/* torch's initial step leaves the rate as it is. */
static int create(lk_host *host, const lk_options *o, void **self) {
  int rc = sched_new(host, o, sizeof(exponential), self);
  if (rc == 0)
    ((exponential *)*self)->gamma = lk_opt_double(o, "gamma");
  return rc;
}

static int step(void *self, lk_interval when, const lk_metric *metrics,
                size_t n) {
  exponential *s = self;
  int64_t epoch;
  (void)metrics;
  (void)n;
  if (!sched_tick(&s->c, when, &epoch))
    return 0;
  return sched_set_lr(&s->c, sched_lr(&s->c) * s->gamma);
}

/* torch's step(0): the closed form base_lr * gamma ** 0. */
static int restart(void *self, bool closed_form) {
  exponential *s = self;
  sched_rewind(&s->c);
  return closed_form
             ? sched_set_lr(&s->c, sched_base_lr(&s->c) * pow(s->gamma, 0.))
             : 0;
}

static const lk_option options[] = {
    {"gamma", LK_OPT_DOUBLE, NULL,
     "multiplicative factor of learning rate decay (a learning rate is never "
     "negative)",
     "[0, inf)"},
    SCHED_INTERVAL_OPTION,
    {NULL, 0, NULL, NULL, NULL}};

static const lk_scheduler_ops scheduler_ops = {.step = step,
                                               .restart = restart};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "exponential",
    .version = "1.0",
    .summary = "decays the learning rate by gamma every step or epoch, as "
               "torch's ExponentialLR",
    .options = options,
    .create = create,
    .destroy = free,
    .scheduler = &scheduler_ops,
    .check_state = sched_check_state,
};

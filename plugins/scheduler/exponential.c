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

static int init(void *self, lk_host *host, const lk_options *o) {
  (void)host;
  ((exponential *)self)->gamma = lk_opt_double(o, "gamma");
  return 0;
}

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

static const sched_kind kind = {sizeof(exponential), init, apply, closed, NULL};

static int create(lk_host *host, const lk_options *o, void **self) {
  return sched_create(host, o, &kind, self);
}

static const lk_option options[] = {
    {"gamma", LK_OPT_DOUBLE, NULL,
     "multiplicative factor of learning rate decay (a learning rate is never "
     "negative)",
     "[0, inf)"},
    SCHED_INTERVAL_OPTION,
    {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "exponential",
    .version = "1.0",
    .summary = "decays the learning rate by gamma every step or epoch, as "
               "torch's ExponentialLR",
    .options = options,
    .create = create,
    .destroy = sched_destroy,
    .scheduler = &sched_ops,
    .check_state = sched_check_state,
};

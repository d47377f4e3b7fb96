/* step_lr: multiplies the learning rate by gamma every step_size steps or
 * epochs, as torch.optim.lr_scheduler.StepLR 1.13 with its recursive form:
 * `lr * gamma` whenever last_epoch is a multiple of step_size, so that a
 * rate changed by someone else between steps is decayed from there. */
#include <stdlib.h>

#include "scheduler_common.h"

typedef struct step_lr {
  sched_common c;
  int64_t step_size;
  double gamma;
} step_lr;

/* torch's initial step leaves the rate as it is. */
static int create(lk_host *host, const lk_options *o, void **self) {
  int rc = sched_new(host, o, sizeof(step_lr), self);
  if (rc == 0) {
    step_lr *s = *self;
    s->step_size = lk_opt_int(o, "step_size");
    s->gamma = lk_opt_double(o, "gamma");
  }
  return rc;
}

static int step(void *self, lk_interval when, const lk_metric *metrics,
                size_t n) {
  step_lr *s = self;
  int64_t epoch;
  (void)metrics;
  (void)n;
  if (!sched_tick(&s->c, when, &epoch) || epoch % s->step_size != 0)
    return 0;
  return sched_set_lr(&s->c, sched_lr(&s->c) * s->gamma);
}

/* torch's step(0) is the closed form base_lr * gamma ** (0 // step_size),
 * base_lr itself; its initial step leaves the rate as it is. */
static int restart(void *self, bool closed_form) {
  step_lr *s = self;
  sched_rewind(&s->c);
  return closed_form
             ? sched_set_lr(&s->c, sched_base_lr(&s->c) * pow(s->gamma, 0.))
             : 0;
}

static const lk_option options[] = {
    {"step_size", LK_OPT_INT, NULL, "period of the decay, in intervals",
     "[1, inf)"},
    {"gamma", LK_OPT_DOUBLE, "0.1",
     "multiplicative factor of the decay (a learning rate is never negative)",
     "[0, inf)"},
    SCHED_INTERVAL_OPTION,
    {NULL, 0, NULL, NULL, NULL}};

static const lk_scheduler_ops scheduler_ops = {.step = step,
                                               .restart = restart};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "step_lr",
    .version = "1.0",
    .summary = "decays the learning rate by gamma every step_size steps or "
               "epochs, as torch's StepLR",
    .options = options,
    .create = create,
    .destroy = free,
    .scheduler = &scheduler_ops,
    .check_state = sched_check_state,
};

/* polynomial: decays the learning rate to 0 over total_iters steps or
 * epochs along (1 - t / total_iters) ** power, as
 * torch.optim.lr_scheduler.PolynomialLR 1.13 with its recursive form: each
 * step multiplies the rate now by ((1 - e / T) / (1 - (e - 1) / T)) **
 * power; past total_iters the rate stays. */
#include <stdlib.h>

#include "scheduler_common.h"

typedef struct polynomial {
  sched_common c;
  int64_t total_iters;
  double power;
} polynomial;

/* torch's initial step leaves the rate as it is. */
static int create(lk_host *host, const lk_options *o, void **self) {
  int rc = sched_new(host, o, sizeof(polynomial), self);
  if (rc == 0) {
    polynomial *s = *self;
    s->total_iters = lk_opt_int(o, "total_iters");
    s->power = lk_opt_double(o, "power");
  }
  return rc;
}

static int step(void *self, lk_interval when, const lk_metric *metrics,
                size_t n) {
  polynomial *s = self;
  int64_t e;
  (void)metrics;
  (void)n;
  if (!sched_tick(&s->c, when, &e) || e > s->total_iters)
    return 0;
  double t = (double)s->total_iters;
  double decay =
      pow((1.0 - (double)e / t) / (1.0 - (double)(e - 1) / t), s->power);
  return sched_set_lr(&s->c, sched_lr(&s->c) * decay);
}

/* torch's step(0): base_lr * (1.0 - min(total_iters, 0) / total_iters) **
 * power. */
static int restart(void *self, bool closed_form) {
  polynomial *s = self;
  sched_rewind(&s->c);
  if (!closed_form)
    return 0;
  double t = (double)s->total_iters;
  return sched_set_lr(&s->c,
                      sched_base_lr(&s->c) * pow(1.0 - 0. / t, s->power));
}

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

static const lk_scheduler_ops scheduler_ops = {.step = step,
                                               .restart = restart};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "polynomial",
    .version = "1.0",
    .summary = "decays the learning rate along a polynomial over total_iters, "
               "as torch's PolynomialLR",
    .options = options,
    .create = create,
    .destroy = free,
    .scheduler = &scheduler_ops,
    .check_state = sched_check_state,
};

/* cosine: cosine annealing of the learning rate from its initial value to
 * eta_min over T_max steps or epochs (and back up over the next T_max, and
 * so on), as torch.optim.lr_scheduler.CosineAnnealingLR 1.13. Its recursive
 * get_lr is reproduced, not the closed form: the two differ in the last
 * bits, and only the recursion gives torch's numbers. */
#include <stdlib.h>

#include "bundled.h"
#include "scheduler_common.h"

typedef struct cosine {
  sched_common c;
  int64_t t_max;
  double eta_min;
} cosine;

static const lk_option options[] = {
    {"T_max", LK_OPT_INT, "auto",
     "intervals from the initial rate down to eta_min (torch requires it; "
     "auto: the run's optimizer steps, or epochs at interval = epoch, or "
     "the part of its parent's a child runs)",
     "[1, inf) or auto"},
    {"eta_min", LK_OPT_DOUBLE, "0",
     "the minimum learning rate (a learning rate is never negative)",
     "[0, inf)"},
    SCHED_INTERVAL_OPTION,
    {NULL, 0, NULL, NULL, NULL}};

/* torch's initial step (last_epoch 0) leaves the rate as it is. */
static int apply(void *self, int64_t e) {
  cosine *s = self;
  if (e == 0)
    return 0;
  double t = (double)s->t_max, lr = sched_lr(&s->c), eta = s->eta_min;
  /* torch's branch for `_step_count == 1 and last_epoch > 0` only serves a
   * scheduler constructed with last_epoch >= 0; a resume here restores the
   * state instead, so it never applies. */
  if ((e - 1 - s->t_max) % (2 * s->t_max) == 0)
    /* The step out of the trough, where the ratio would divide by 1 + cos(pi) =
     * 0. */
    lr = lr + (sched_base_lr(&s->c) - eta) * (1 - cos(SCHED_PI / t)) / 2;
  else
    lr = (1 + cos(SCHED_PI * (double)e / t)) /
             (1 + cos(SCHED_PI * (double)(e - 1) / t)) * (lr - eta) +
         eta;
  return sched_set_lr(&s->c, lr);
}

/* torch's step(0) is its closed form at epoch 0, eta_min + (base_lr -
 * eta_min) * (1 + cos(0)) / 2, which need not round to base_lr. */
static double closed(void *self) {
  cosine *s = self;
  double eta = s->eta_min, t = (double)s->t_max;
  return eta + (sched_base_lr(&s->c) - eta) * (1 + cos(SCHED_PI * 0. / t)) / 2;
}

static const sched_kind kind = {
    .size = sizeof(cosine),
    .fields = {SCHED_FIELD(cosine, t_max, "T_max", INT),
               SCHED_FIELD(cosine, eta_min, "eta_min", DOUBLE)},
    .apply = apply,
    .closed = closed};

BUNDLED_SCHEDULER_OF(kind, "cosine",
                     "cosine annealing of the learning rate, as torch's "
                     "CosineAnnealingLR",
                     sched_check_state);

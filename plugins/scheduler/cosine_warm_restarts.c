/* cosine_warm_restarts: cosine annealing from the initial rate down to
 * eta_min over T_i steps or epochs, then back to the initial rate (a warm
 * restart), T_i growing by T_mult after each, as
 * torch.optim.lr_scheduler.CosineAnnealingWarmRestarts 1.13 (SGDR). Its
 * rate is computed afresh each step from base_lr (torch has no recursive
 * form for it): eta_min + (base_lr - eta_min) * (1 + cos(pi * T_cur /
 * T_i)) / 2. T_cur and T_i are checkpointed, so a resumed run continues
 * the same cycle. */
#include <stdlib.h>

#include "bundled.h"
#include "scheduler_common.h"

typedef struct warm_restarts {
  sched_common c;
  int64_t t_0, t_mult;
  double eta_min;
  lk_tensor *t_cur, *t_i; /* [1] each: torch's T_cur and T_i */
} warm_restarts;

static const lk_option options[] = {
    {"T_0", LK_OPT_INT, NULL, "number of iterations for the first restart",
     "[1, inf)"},
    {"T_mult", LK_OPT_INT, "1", "a factor increases T_i after a restart",
     "[1, inf)"},
    {"eta_min", LK_OPT_DOUBLE, "0",
     "minimum learning rate (a learning rate is never negative)", "[0, inf)"},
    SCHED_INTERVAL_OPTION,
    {NULL, 0, NULL, NULL, NULL}};

static double *t_cur(warm_restarts *s) {
  return s->t_cur->data;
}

static double *t_i(warm_restarts *s) {
  return s->t_i->data;
}

/* torch's step at epoch E: at 0 (its initial step, and step(0)) T_i =
 * T_0, T_cur = 0; then T_cur + 1, a restart when it reaches T_i. The rate
 * is torch's get_lr, eta_min + (base_lr - eta_min) * (1 + cos(pi * T_cur /
 * T_i)) / 2. */
static int apply(void *self, int64_t e) {
  warm_restarts *s = self;
  double eta = s->eta_min;
  if (e == 0) {
    *t_cur(s) = 0;
    *t_i(s) = (double)s->t_0;
  } else if ((*t_cur(s) += 1) >= *t_i(s)) {
    *t_cur(s) -= *t_i(s);
    *t_i(s) *= (double)s->t_mult;
  }
  return sched_set_lr(&s->c,
                      eta + (sched_base_lr(&s->c) - eta) *
                                (1 + cos(SCHED_PI * *t_cur(s) / *t_i(s))) / 2);
}

static int init(void *self, lk_host *host, const lk_options *o) {
  warm_restarts *s = self;
  size_t one = 1;
  int rc = lk_host_add_state(host, "T_cur", LK_F64, 1, &one, &s->t_cur);
  return rc ? rc : lk_host_add_state(host, "T_i", LK_F64, 1, &one, &s->t_i);
}

/* T_cur counts within the cycle, T_i (T_0 * T_mult ** k, which may pass
 * 2^53 with a large T_mult) its length. */
static int check_state(void *self) {
  warm_restarts *s = self;
  lk_host *h = s->c.host;
  int rc = sched_check_state(&s->c);
  if (rc == 0)
    rc = lk_state_check(h, s->t_i, (double)s->t_0, 1e308, true);
  if (rc == 0)
    rc = lk_state_check(h, s->t_cur, 0, *t_i(s) - 1, true);
  return rc;
}

/* A restart is the same step whether closed_form or not. */
static const sched_kind kind = {
    .size = sizeof(warm_restarts),
    .fields = {SCHED_FIELD(warm_restarts, t_0, "T_0", INT),
               SCHED_FIELD(warm_restarts, t_mult, "T_mult", INT),
               SCHED_FIELD(warm_restarts, eta_min, "eta_min", DOUBLE)},
    .init = init,
    .apply = apply};

BUNDLED_SCHEDULER_OF(kind, "cosine_warm_restarts",
                     "cosine annealing with warm restarts (SGDR), as torch's "
                     "CosineAnnealingWarmRestarts",
                     check_state);

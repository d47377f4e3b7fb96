/* multistep: multiplies the learning rate by gamma each time the step or
 * epoch count reaches one of the milestones, as
 * torch.optim.lr_scheduler.MultiStepLR 1.13. torch keeps the milestones in
 * a Counter: a milestone listed twice decays by gamma ** 2 there, and
 * their order does not matter. Its recursive form is reproduced (lr *
 * gamma ** count from the rate now), and its closed form for step(0). */
#include <stdlib.h>

#include "bundled.h"
#include "scheduler_common.h"

typedef struct multistep {
  sched_common c;
  double gamma;
  int64_t *milestones;
  size_t n;
} multistep;

static const lk_option options[] = {
    {"milestones", LK_OPT_DOUBLES, NULL,
     "list of epoch indices (steps at interval = step), a comma list of whole "
     "numbers: e.g. 30,80",
     "[0, inf)"},
    {"gamma", LK_OPT_DOUBLE, "0.1",
     "multiplicative factor of learning rate decay (a learning rate is never "
     "negative)",
     "[0, inf)"},
    SCHED_INTERVAL_OPTION,
    {NULL, 0, NULL, NULL, NULL}};

static void fini(void *self) {
  free(((multistep *)self)->milestones);
}

/* How many milestones are E (torch's self.milestones[E]), or at most E
 * (bisect_right of the sorted list: the closed form's). */
static double count(const multistep *s, int64_t e, bool up_to) {
  size_t k = 0;
  for (size_t i = 0; i < s->n; i++)
    k += up_to ? s->milestones[i] <= e : s->milestones[i] == e;
  return (double)k;
}

/* torch's recursive get_lr at last_epoch E. */
static int apply(void *self, int64_t e) {
  multistep *s = self;
  double k = count(s, e, false);
  return k == 0 ? 0 : sched_set_lr(&s->c, sched_lr(&s->c) * pow(s->gamma, k));
}

static int init(void *self, lk_host *host, const lk_options *o) {
  multistep *s = self;
  return sched_int_list(host, o, "milestones", 0, false, &s->milestones, &s->n);
}

/* torch's step(0): base_lr * gamma ** bisect_right(sorted milestones, 0). */
static double closed(void *self) {
  multistep *s = self;
  return sched_base_lr(&s->c) * pow(s->gamma, count(s, 0, true));
}

/* torch's initial step: a milestone 0 decays at once. */
static const sched_kind kind = {
    .size = sizeof(multistep),
    .fields = {SCHED_FIELD(multistep, gamma, "gamma", DOUBLE)},
    .init = init,
    .apply = apply,
    .closed = closed,
    .fini = fini};

BUNDLED_SCHEDULER_OF(kind, "multistep",
                     "decays the learning rate by gamma at each milestone, as "
                     "torch's MultiStepLR",
                     sched_check_state);

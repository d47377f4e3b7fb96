/* The scheduler kind of sequential.so: schedulers called one after the
 * other, each from a milestone on, as torch.optim.lr_scheduler.SequentialLR
 * 1.13:
 *
 *   [plugins]
 *   scheduler = lrs:sequential     # named apart from the model sequential
 *   [lrs]
 *   schedulers = warm:linear_warmup, main:cosine
 *   milestones = 100
 *   [warm]
 *   total_iters = 100
 *   [main]
 *   T_max = 900
 *
 * As torch's constructor: the schedulers are created in order (each
 * applies its initial step), then the rate goes back to the initial one
 * and the first scheduler applies its initial step again. At step (or
 * epoch) e, the scheduler of the milestone interval e falls in steps; at a
 * milestone the next one starts with torch's step(0) (its closed form at
 * epoch 0). A child needs the restart entry (ABI 1.5): reduce_on_plateau,
 * chained and sequential itself cannot be one, as in torch. */
#include <stdlib.h>
#include <string.h>

#include "sched_compose.h"
#include "scheduler_common.h"
#include "sequential_lr.h"

typedef struct seqlr {
  seq_what what; /* SEQ_WHAT_LR */
  lk_host *host;
  lk_interval interval;
  lk_scheduler **children;
  size_t n;
  int64_t *milestones;   /* n - 1, increasing */
  lk_tensor *last_epoch; /* [1]: torch's */
} seqlr;

/* An option the config gives (not its default). */
static bool given(const lk_options *o, const char *name) {
  const char *where = lk_opt_where(o, name);
  return where && strcmp(where, "default") != 0;
}

int seqlr_choose(lk_host *host, const lk_options *o, bool *lr) {
  const char *name = lk_host_name(host);
  /* Not interval: the effective config.ini of a model run holds its
   * default, and must run again. */
  bool model = given(o, "layers") || given(o, "init");
  bool sched = given(o, "schedulers") || given(o, "milestones");
  const char *apart =
      "one instance of sequential is the model or the scheduler: name them "
      "apart, e.g. step = sequential with layers under [sequential], and "
      "scheduler = lrs:sequential with schedulers and milestones under [lrs]";
  if (model && sched)
    return lk_fail(
        host, LK_ECONFIG,
        "%s: [%s] gives both layers (the model) and %s (the "
        "scheduler, torch's SequentialLR): %s",
        lk_opt_where(o, given(o, "schedulers") ? "schedulers" : "milestones"),
        name, given(o, "schedulers") ? "schedulers" : "milestones", apart);
  if (!model && !sched)
    return lk_fail(host, LK_ECONFIG,
                   "[%s] gives neither layers (the model: option layers is "
                   "required) nor schedulers and milestones (the scheduler, "
                   "torch's SequentialLR); %s",
                   name, apart);
  bool as_sched = lk_host_plays(host, "scheduler");
  if (model && as_sched)
    return lk_fail(host, LK_ECONFIG,
                   "%s: [%s] gives layers, the model, but the instance is "
                   "also the scheduler: %s",
                   lk_opt_where(o, given(o, "layers") ? "layers" : "init"),
                   name, apart);
  if (sched && (!as_sched || lk_host_plays(host, "step") ||
                lk_host_plays(host, "backward")))
    return lk_fail(host, LK_ECONFIG,
                   "[%s] gives schedulers, the scheduler (torch's "
                   "SequentialLR), but the instance is %s: %s",
                   name, as_sched ? "also the model" : "not the scheduler",
                   apart);
  *lr = sched;
  return 0;
}

void seqlr_destroy(void *self) {
  seqlr *s = self;
  free(s->children);
  free(s->milestones);
  free(s);
}

/* The schedulers and milestones, checked as torch's constructor does (and
 * milestones increasing, which torch's bisect assumes). */
static int make_children(seqlr *s, const lk_options *o) {
  lk_host *host = s->host;
  const char *name = lk_host_name(host);
  size_t n_milestones;
  char **names = NULL;
  int rc = sched_int_list(host, o, "milestones", 1, true, &s->milestones,
                          &n_milestones);
  if (rc != 0 || (rc = compose_names(host, o, "schedulers", &names, &s->n)))
    return rc;
  const char *milestones = lk_opt_string(o, "milestones");
  if (n_milestones + 1 != s->n)
    rc = lk_fail(host, LK_ECONFIG,
                 "%s: option %s.milestones = %s: Sequential Schedulers "
                 "expects number of schedulers provided to be one more than "
                 "the number of milestone points, but got number of "
                 "schedulers %zu and the number of milestones to be equal to "
                 "%zu (torch's ValueError)",
                 lk_opt_where(o, "milestones"), name,
                 *milestones ? milestones : "(none)", s->n, n_milestones);
  if (rc == 0)
    rc = compose_children(host, names, s->n, &s->children);
  for (size_t i = 0; rc == 0 && i < s->n; i++)
    if (!lk_scheduler_can_restart(s->children[i]))
      rc = lk_fail(host, LK_ECONFIG,
                   "%s: option %s.schedulers: %s cannot be a scheduler of "
                   "sequential: it cannot start again at a milestone (it has "
                   "no restart entry: reduce_on_plateau, chained and "
                   "sequential have none, as torch's SequentialLR cannot "
                   "step ReduceLROnPlateau, ChainedScheduler or SequentialLR; "
                   "nor has a plugin built before ABI 1.5)",
                   lk_opt_where(o, "schedulers"), name, names[i]);
  free(names);
  return rc;
}

int seqlr_create(lk_host *host, const lk_options *o, void **self) {
  seqlr *s = calloc(1, sizeof *s);
  if (!s)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  s->what = SEQ_WHAT_LR;
  s->host = host;
  s->interval = sched_interval(o);
  size_t one = 1;
  int rc = make_children(s, o);
  if (rc == 0)
    rc = lk_host_add_state(host, "last_epoch", LK_F64, 1, &one, &s->last_epoch);
  /* torch: the rate back to initial_lr, and the first scheduler's initial
   * step again (its last_epoch - 1, then + 1). last_epoch is 0. */
  if (rc == 0)
    rc = lk_host_set_lr(host, lk_host_initial_lr(host));
  if (rc == 0)
    rc = lk_scheduler_restart(s->children[0], false);
  if (rc != 0) {
    seqlr_destroy(s);
    return rc;
  }
  *self = s;
  return 0;
}

/* A checkpoint's step count, and its children's in step with it: at
 * last_epoch e, scheduler i (from milestone m_i, m_0 = 0, until m_i+1) has
 * been restarted at m_i and stepped since, so its last_epoch is e - m_i,
 * at most m_i+1 - 1 - m_i once the next one took over, and 0 before its
 * milestone (its constructor's step). Each child's own range was checked
 * first. */
int seqlr_check_state(void *self) {
  seqlr *s = self;
  int rc = lk_state_check(s->host, s->last_epoch, 0, LK_STATE_MAX_COUNT, true);
  double e = *(const double *)s->last_epoch->data, got;
  const lk_tensor *t;
  for (size_t i = 0; rc == 0 && i < s->n; i++) {
    if (!compose_last_epoch(s->children[i], &got, &t))
      continue;
    double from = i ? (double)s->milestones[i - 1] : 0;
    double want = e < from ? 0 : e - from;
    if (i + 1 < s->n && want > (double)s->milestones[i] - 1 - from)
      want = (double)s->milestones[i] - 1 - from;
    if (got != want)
      rc = lk_fail(s->host, LK_EFORMAT,
                   "state %s[0] = %.17g is out of step with %s[0] = %.17g: "
                   "expected %.17g (sequential's scheduler %zu of %zu counts "
                   "its steps from step %.17g %s)",
                   t->name, got, s->last_epoch->name, e, want, i + 1, s->n,
                   from, i + 1 < s->n ? "until the next milestone" : "on");
  }
  return rc;
}

/* torch's step: the scheduler of the interval last_epoch falls in, which
 * at its milestone starts with step(0). */
static int step(void *self, lk_interval when, const lk_metric *metrics,
                size_t n) {
  seqlr *s = self;
  if (when != s->interval)
    return 0;
  double *last = s->last_epoch->data;
  *last += 1;
  int64_t e = (int64_t)*last;
  size_t idx = 0; /* bisect_right(milestones, e) */
  while (idx + 1 < s->n && s->milestones[idx] <= e)
    idx++;
  if (idx > 0 && s->milestones[idx - 1] == e)
    return lk_scheduler_restart(s->children[idx], true);
  return lk_scheduler_step(s->children[idx], when, metrics, n);
}

const lk_scheduler_ops seqlr_scheduler_ops = {.step = step};

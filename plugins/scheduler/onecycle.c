/* onecycle: the 1cycle policy, as torch.optim.lr_scheduler.OneCycleLR
 * 1.13: the rate rises from max_lr / div_factor to max_lr over the first
 * pct_start of total_steps, then falls to max_lr / div_factor /
 * final_div_factor (three_phase: back to the initial rate first, then
 * down), by cosine or linear annealing; the momentum moves the other way
 * between max_momentum and base_momentum (beta1 for the adam family, as
 * torch's use_beta1). The rate is a function of the step count (torch's
 * form is not recursive), checkpointed as every scheduler's.
 *
 * total_steps, or epochs * steps_per_epoch, as torch needs them; by
 * default total_steps = auto, the run's length, which the host counts
 * before create. Stepping more than total_steps times (torch's
 * ValueError) fails the run, naming the scheduler. */
#include <stdlib.h>
#include <string.h>

#include "bundled.h"
#include "scheduler_common.h"

#define MAX_PHASES 3

/* A phase ends at end_step and anneals between two of the values below. */
enum { INITIAL, MAX, MIN, N_RATES };
enum { MAX_M, BASE_M, N_MOMENTA };

typedef struct phase {
  double end_step;
  int start_lr, end_lr, start_m, end_m;
} phase;

typedef struct onecycle {
  sched_common c;
  int64_t total_steps;
  bool cos_anneal, cycle_momentum;
  double rate[N_RATES], momentum[N_MOMENTA];
  phase phases[MAX_PHASES];
  int n_phases;
} onecycle;

/* torch's _annealing_cos and _annealing_linear. */
static double anneal(const onecycle *s, double start, double end, double pct) {
  if (!s->cos_anneal)
    return (end - start) * pct + start;
  double cos_out = cos(SCHED_PI * pct) + 1;
  return end + (start - end) / 2.0 * cos_out;
}

/* torch's get_lr at step STEP_NUM, and its side effect on the momentum. */
static int apply(void *self, int64_t step_num) {
  onecycle *s = self;
  if (step_num > s->total_steps)
    return lk_fail(s->c.host, LK_EPLUGIN,
                   "tried to step %lld times; the specified number of total "
                   "steps is %lld (torch's ValueError): make total_steps (or "
                   "epochs * steps_per_epoch) cover the run",
                   (long long)step_num + 1, (long long)s->total_steps);
  double start_step = 0, t = (double)step_num;
  for (int i = 0; i < s->n_phases; i++) {
    const phase *p = &s->phases[i];
    if (t <= p->end_step || i == s->n_phases - 1) {
      double len = p->end_step - start_step;
      if (len == 0) /* torch's ZeroDivisionError */
        return lk_fail(s->c.host, LK_ECONFIG,
                       "phase %d of the cycle has no steps at step %lld "
                       "(pct_start * total_steps = %.17g): torch divides by "
                       "zero here; change pct_start or total_steps",
                       i + 1, (long long)step_num, s->phases[0].end_step + 1);
      double pct = (t - start_step) / len;
      /* Past the cycle (step total_steps, which no step of it uses) linear
       * annealing overshoots min_lr and may go below 0 (the momentum too,
       * when max_momentum < base_momentum), which torch sets and the host
       * refuses: 0 instead. */
      bool past = step_num == s->total_steps;
      if (s->cycle_momentum) {
        double m =
            anneal(s, s->momentum[p->start_m], s->momentum[p->end_m], pct);
        int rc = lk_host_set_momentum(s->c.host, m < 0 && past ? 0 : m);
        if (rc != 0)
          return rc;
      }
      double lr = anneal(s, s->rate[p->start_lr], s->rate[p->end_lr], pct);
      if (lr < 0 && past)
        lr = 0;
      return sched_set_lr(&s->c, lr);
    }
    start_step = p->end_step;
  }
  return 0; /* not reached: the last phase takes every step */
}

/* total_steps as torch finds it: given, or epochs * steps_per_epoch. */
static int total_steps(lk_host *host, const lk_options *o, int64_t *out) {
  int64_t total = lk_opt_int(o, "total_steps");
  int64_t epochs = lk_opt_int(o, "epochs");
  int64_t per_epoch = lk_opt_int(o, "steps_per_epoch");
  /* torch's None with epochs and steps_per_epoch is total_steps = 0 here:
   * left at auto, the run's length would silently win over them. */
  const char *where = lk_opt_where(o, "total_steps");
  if ((epochs || per_epoch) && where && strncmp(where, "auto", 4) == 0)
    return lk_fail(host, LK_ECONFIG,
                   "epochs = %lld and steps_per_epoch = %lld are given, but "
                   "total_steps = auto (the run's length, %lld) is used "
                   "before them: set total_steps = 0 (torch's None) to use "
                   "epochs * steps_per_epoch, or leave them out",
                   (long long)epochs, (long long)per_epoch, (long long)total);
  if (total == 0 && (epochs == 0 || per_epoch == 0))
    return lk_fail(host, LK_ECONFIG,
                   "You must define either total_steps OR (epochs AND "
                   "steps_per_epoch) (torch's ValueError): e.g. total_steps "
                   "= the run's [loop] max_steps");
  if (total == 0 && epochs > INT64_MAX / per_epoch)
    return lk_fail(host, LK_ECONFIG, "epochs * steps_per_epoch overflows");
  *out = total ? total : epochs * per_epoch;
  return 0;
}

/* torch's _schedule_phases. */
static void make_phases(onecycle *s, double pct_start, bool three_phase) {
  double total = (double)s->total_steps;
  phase *p = s->phases;
  p[0] = (phase){pct_start * total - 1, INITIAL, MAX, MAX_M, BASE_M};
  if (three_phase) {
    p[1] = (phase){2 * pct_start * total - 2, MAX, INITIAL, BASE_M, MAX_M};
    p[2] = (phase){total - 1, INITIAL, MIN, MAX_M, MAX_M};
    s->n_phases = 3;
  } else {
    p[1] = (phase){total - 1, MAX, MIN, BASE_M, MAX_M};
    s->n_phases = 2;
  }
}

static int init(void *self, lk_host *host, const lk_options *o) {
  onecycle *s = self;
  double max_lr = lk_opt_double(o, "max_lr");
  double initial = max_lr / lk_opt_double(o, "div_factor");
  int rc = total_steps(host, o, &s->total_steps);
  s->cos_anneal = strcmp(lk_opt_string(o, "anneal_strategy"), "cos") == 0;
  s->cycle_momentum = lk_opt_bool(o, "cycle_momentum");
  s->rate[INITIAL] = initial;
  s->rate[MAX] = max_lr;
  s->rate[MIN] = initial / lk_opt_double(o, "final_div_factor");
  s->momentum[MAX_M] = lk_opt_double(o, "max_momentum");
  s->momentum[BASE_M] = lk_opt_double(o, "base_momentum");
  make_phases(s, lk_opt_double(o, "pct_start"), lk_opt_bool(o, "three_phase"));
  return rc;
}

/* No closed form: torch's step(0) is get_lr at 0, as its initial step. */
static const sched_kind kind = {
    .size = sizeof(onecycle), .init = init, .apply = apply};

static int create(lk_host *host, const lk_options *o, void **self) {
  int64_t total = 0;
  bool cycle_momentum = lk_opt_bool(o, "cycle_momentum");
  int rc = total_steps(host, o, &total);
  if (rc == 0 && cycle_momentum)
    rc = sched_need_momentum(host);
  /* torch sets the group's initial_lr (which its base class's setdefault
   * then keeps), and the momentum to max_momentum. base_momentum is set
   * first, so that an optimizer that cannot take it (beta1 >= 1) refuses
   * it now rather than at the cycle's peak. */
  if (rc == 0)
    rc = lk_host_set_initial_lr(host, lk_opt_double(o, "max_lr") /
                                          lk_opt_double(o, "div_factor"));
  if (rc == 0 && cycle_momentum)
    rc = lk_host_set_momentum(host, lk_opt_double(o, "base_momentum"));
  if (rc == 0 && cycle_momentum)
    rc = lk_host_set_momentum(host, lk_opt_double(o, "max_momentum"));
  return rc ? rc : sched_create(host, o, &kind, self);
}

/* At most total_steps + 1 step() calls: torch's ValueError past that. */
static int check_state(void *self) {
  onecycle *s = self;
  int rc = sched_check_state(&s->c);
  return rc ? rc
            : lk_state_check(s->c.host, s->c.last_epoch, 0,
                             (double)s->total_steps, true);
}

static const lk_option options[] = {
    {"max_lr", LK_OPT_DOUBLE, NULL, "upper learning rate boundary in the cycle",
     "[0, inf)"},
    {"total_steps", LK_OPT_INT, "auto",
     "the total number of steps in the cycle; auto: the run's optimizer "
     "steps (epochs at interval = epoch), or the part of its parent's a "
     "child runs; 0 (torch's None): epochs * steps_per_epoch",
     "[0, inf) or auto"},
    {"epochs", LK_OPT_INT, "0",
     "the number of epochs to train for, with steps_per_epoch when "
     "total_steps is 0",
     "[0, inf)"},
    {"steps_per_epoch", LK_OPT_INT, "0",
     "the number of steps per epoch to train for, with epochs when "
     "total_steps is 0",
     "[0, inf)"},
    {"pct_start", LK_OPT_DOUBLE, "0.3",
     "the percentage of the cycle (in number of steps) spent increasing the "
     "learning rate",
     "[0, 1]"},
    {"anneal_strategy", LK_OPT_ENUM, "cos",
     "cos: cosine annealing; linear: linear annealing", "cos|linear"},
    {"cycle_momentum", LK_OPT_BOOL, "true",
     "momentum is cycled inversely to learning rate between base_momentum "
     "and max_momentum (beta1 for the adam family)",
     NULL},
    {"base_momentum", LK_OPT_DOUBLE, "0.85",
     "lower momentum boundary in the cycle; at the peak of a cycle, momentum "
     "is base_momentum and learning rate is max_lr",
     "[0, inf)"},
    {"max_momentum", LK_OPT_DOUBLE, "0.95",
     "upper momentum boundary in the cycle; at the start of a cycle, "
     "momentum is max_momentum and learning rate is the initial rate",
     "[0, inf)"},
    {"div_factor", LK_OPT_DOUBLE, "25",
     "determines the initial learning rate via initial_lr = max_lr / "
     "div_factor",
     "(0, inf)"},
    {"final_div_factor", LK_OPT_DOUBLE, "1e4",
     "determines the minimum learning rate via min_lr = initial_lr / "
     "final_div_factor",
     "(0, inf)"},
    {"three_phase", LK_OPT_BOOL, "false",
     "use a third phase of the schedule to annihilate the learning rate "
     "according to final_div_factor instead of modifying the second phase",
     NULL},
    {"interval", LK_OPT_ENUM, "step",
     "when the rate changes: after every optimizer step (torch's OneCycleLR "
     "is stepped after every batch; total_steps counts them), or after every "
     "epoch and its validation",
     "step|epoch"},
    {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_SCHEDULER(
    "onecycle",
    "the 1cycle policy for the learning rate and the momentum, as "
    "torch's OneCycleLR",
    sched_destroy, check_state, &sched_ops);

/* cyclic: cycles the learning rate between base_lr and max_lr (and the
 * momentum the other way, between max_momentum and base_momentum), as
 * torch.optim.lr_scheduler.CyclicLR 1.13: a triangle of step_size_up
 * steps up and step_size_down down, its height scaled by one of torch's
 * three policies (triangular, triangular2, exp_range). The rate does not
 * depend on the rate before (torch's form is not recursive): it is a
 * function of the step count, checkpointed as every scheduler's.
 *
 * torch evaluates a built-in policy on the cycle number (triangular,
 * triangular2) or on the iteration (exp_range), whatever its scale_mode
 * says; scale_mode applies only to a custom scale_fn. loopkit has no
 * custom scale_fn: scale_mode = cycle or iterations evaluates the mode's
 * function as torch does for scale_fn = that function with that
 * scale_mode; the default, mode, is what torch does without one.
 *
 * Momentum: torch 1.13 cycles an optimizer's 'momentum' and refuses one
 * that has betas; torch 2.2 and later cycle beta1 as OneCycleLR does.
 * loopkit cycles whatever lk_host_momentum reaches (beta1 of the adam
 * family), as the later torch does. */
#include <stdlib.h>
#include <string.h>

#include "bundled.h"
#include "scheduler_common.h"

typedef enum cyclic_mode { TRIANGULAR, TRIANGULAR2, EXP_RANGE } cyclic_mode;

typedef struct cyclic {
  sched_common c;
  double base_lr, max_lr, gamma;
  double total_size, step_ratio; /* torch's, in its operations */
  cyclic_mode mode;
  bool on_cycle; /* scale_fn is evaluated on the cycle (else the iteration) */
  bool cycle_momentum;
  double base_momentum, max_momentum;
} cyclic;

/* torch's _triangular_scale_fn, _triangular2_scale_fn, _exp_range_scale_fn
 * of X (an integer). */
static double scale_fn(const cyclic *s, double x) {
  switch (s->mode) {
  case TRIANGULAR2: return 1 / pow(2., x - 1);
  case EXP_RANGE: return pow(s->gamma, x);
  case TRIANGULAR: break;
  }
  return 1.;
}

/* torch's get_lr at last_epoch E, and its side effect on the momentum. */
static int apply(void *self, int64_t e) {
  cyclic *s = self;
  double it = (double)e;
  double cycle = floor(1 + it / s->total_size);
  double x = 1. + it / s->total_size - cycle;
  double scale_factor =
      x <= s->step_ratio ? x / s->step_ratio : (x - 1) / (s->step_ratio - 1);
  double scale = scale_fn(s, s->on_cycle ? cycle : it);
  double lr = s->base_lr + (s->max_lr - s->base_lr) * scale_factor * scale;
  if (s->cycle_momentum) {
    double m = s->max_momentum -
               (s->max_momentum - s->base_momentum) * scale_factor * scale;
    int rc = lk_host_set_momentum(s->c.host, m);
    if (rc != 0)
      return rc;
  }
  return sched_set_lr(&s->c, lr);
}

static int init(void *self, lk_host *host, const lk_options *o) {
  cyclic *s = self;
  const char *mode = lk_opt_string(o, "mode");
  const char *scale_mode = lk_opt_string(o, "scale_mode");
  int64_t up = lk_opt_int(o, "step_size_up");
  int64_t down = lk_opt_int(o, "step_size_down");
  (void)host;
  s->base_lr = lk_opt_double(o, "base_lr");
  s->max_lr = lk_opt_double(o, "max_lr");
  s->gamma = lk_opt_double(o, "gamma");
  s->total_size = (double)up + (double)(down < 0 ? up : down);
  s->step_ratio = (double)up / s->total_size;
  s->mode = !strcmp(mode, "triangular2") ? TRIANGULAR2
            : !strcmp(mode, "exp_range") ? EXP_RANGE
                                         : TRIANGULAR;
  s->on_cycle = !strcmp(scale_mode, "mode") ? s->mode != EXP_RANGE
                                            : !strcmp(scale_mode, "cycle");
  s->cycle_momentum = lk_opt_bool(o, "cycle_momentum");
  s->base_momentum = lk_opt_double(o, "base_momentum");
  s->max_momentum = lk_opt_double(o, "max_momentum");
  /* torch's base_lrs are base_lr, whatever initial_lr is. */
  *(double *)s->c.base_lr->data = s->base_lr;
  return 0;
}

/* No closed form: torch's step(0) is get_lr at 0, as its initial step. */
static const sched_kind kind = {
    .size = sizeof(cyclic), .init = init, .apply = apply};

static int create(lk_host *host, const lk_options *o, void **self) {
  bool cycle_momentum = lk_opt_bool(o, "cycle_momentum");
  /* torch sets the rate (and the momentum) before its base class's
   * constructor, whose setdefault may take it as initial_lr. */
  int rc = cycle_momentum ? sched_need_momentum(host) : 0;
  if (rc == 0)
    rc = lk_host_set_lr(host, lk_opt_double(o, "base_lr"));
  if (rc == 0 && cycle_momentum)
    rc = lk_host_set_momentum(host, lk_opt_double(o, "base_momentum"));
  return rc ? rc : sched_create(host, o, &kind, self);
}

static const lk_option options[] = {
    {"base_lr", LK_OPT_DOUBLE, NULL,
     "initial learning rate which is the lower boundary in the cycle",
     "[0, inf)"},
    {"max_lr", LK_OPT_DOUBLE, NULL,
     "upper learning rate boundary in the cycle; functionally, it defines "
     "the cycle amplitude (max_lr - base_lr)",
     "[0, inf)"},
    {"step_size_up", LK_OPT_INT, "2000",
     "number of training iterations in the increasing half of a cycle",
     "[1, inf)"},
    {"step_size_down", LK_OPT_INT, "-1",
     "number of training iterations in the decreasing half of a cycle; -1 "
     "(torch's None): step_size_up",
     "[-1, inf)"},
    {"mode", LK_OPT_ENUM, "triangular",
     "triangular: a basic triangular cycle without amplitude scaling; "
     "triangular2: scales initial amplitude by half each cycle; exp_range: "
     "scales initial amplitude by gamma ** (cycle iterations)",
     "triangular|triangular2|exp_range"},
    {"gamma", LK_OPT_DOUBLE, "1.0",
     "constant in 'exp_range' scaling function: gamma ** (cycle iterations)",
     "[0, inf)"},
    {"scale_mode", LK_OPT_ENUM, "mode",
     "what the mode's scaling function is evaluated on: cycle number or "
     "cycle iterations (training iterations since start of cycle); mode: "
     "torch's for the built-in modes (cycle for triangular and triangular2, "
     "iterations for exp_range)",
     "mode|cycle|iterations"},
    {"cycle_momentum", LK_OPT_BOOL, "true",
     "momentum is cycled inversely to learning rate between base_momentum "
     "and max_momentum (beta1 for the adam family)",
     NULL},
    {"base_momentum", LK_OPT_DOUBLE, "0.8",
     "lower momentum boundary in the cycle; at the peak of a cycle, momentum "
     "is base_momentum and learning rate is max_lr",
     "[0, inf)"},
    {"max_momentum", LK_OPT_DOUBLE, "0.9",
     "upper momentum boundary in the cycle; at the start of a cycle, "
     "momentum is max_momentum and learning rate is base_lr",
     "[0, inf)"},
    {"interval", LK_OPT_ENUM, "step",
     "when the rate changes: after every optimizer step (torch's CyclicLR "
     "is stepped after every batch), or after every epoch and its "
     "validation",
     "step|epoch"},
    {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor =
    BUNDLED_SCHEDULER("cyclic",
                      "cycles the learning rate (and the momentum) between two "
                      "bounds, as torch's CyclicLR",
                      sched_destroy, sched_check_state, &sched_ops);

/* The run's optimizers and schedulers: several optimizers, each over its
 * own parameters, each with parameter groups, and the schedulers that drive
 * them (optim.c has the design). */
#ifndef LK_OPTIM_H
#define LK_OPTIM_H

#include <loopkit/closure.h>

#include "registry.h"
#include "thunk.h"

typedef int (*lk__opt_step_fn)(void *self, lk_tensor *const *params, size_t n,
                               lk_closure_fn closure);
typedef int (*lk__sched_step_fn)(void *self, lk_interval when,
                                 const lk_metric *m, size_t n);

#define LK__MAX_OPTIMIZERS 8
#define LK__MAX_GROUPS 16 /* named groups of one optimizer */
#define LK__MAX_SCHEDULERS 8
/* lr columns of one row: every group of every optimizer. */
#define LK__MAX_PARTS (LK__MAX_OPTIMIZERS * (LK__MAX_GROUPS + 1))

/* One plugin instance stepping some parameters: an optimizer's default
 * group (its own instance, [OPT]) or a named group ([OPT.GROUP], a second
 * instance of the same plugin named OPT.GROUP). */
typedef struct lk__opt_part {
  lk__instance *in;
  const char *group;    /* GROUP; NULL: the default group */
  char *lr_column;      /* lr, lr_GROUP, lr_OPT, lr_OPT.GROUP */
  double lr_before;     /* its rate before the step, for the row */
  const char *params;   /* its [section] params; NULL: the default group */
  lk__opt_step_fn step; /* its plugin's step, profiled or not (calls.c) */
} lk__opt_part;

/* One optimizer of [plugins] optimizer = ... */
typedef struct lk__optimizer {
  size_t index;     /* in [plugins] optimizer's list */
  lk__instance *in; /* its default group's instance: the configured one */
  lk__opt_part parts[LK__MAX_GROUPS + 1]; /* [0]: the default group */
  size_t n_parts;
  const lk_config_entry *claims; /* [OPT] params; NULL: what no other takes */
  const lk_config_entry *groups; /* [OPT] groups; NULL: none */
  lk_tensor **params;            /* what it steps, every group's, in order */
  size_t n_params;
  lk_tensor **zero_set; /* what its zero_grad clears (its own, and with one
                           optimizer or as the first, what nobody steps) */
  size_t n_zero;
  char *loss_column; /* loss (the first), loss_OPT (the others) */
  bool unscaled;     /* manual, precision: its gradients are unscaled since the
                        last backward */
  bool skip;         /* ... and they overflowed: its step is skipped */
} lk__optimizer;

/* One scheduler of [plugins] scheduler = ..., with its copies for the
 * groups of the optimizer it drives. */
typedef struct lk__sched {
  lk__instance *in;
  lk__optimizer *opt; /* [SCHED] optimizer = NAME; the first */
  lk__instance *copies[LK__MAX_GROUPS]; /* one per named group, in order */
  size_t n_copies;
  lk__sched_step_fn step; /* its plugin's step, profiled or not (calls.c) */
} lk__sched;

typedef struct lk__optim {
  lk__optimizer opt[LK__MAX_OPTIMIZERS];
  size_t n;
  lk__sched sched[LK__MAX_SCHEDULERS];
  size_t n_sched;
  lk__optimizer *active; /* whose closure runs (several, automatic) */
  /* One evaluation shared by the groups of one step (optim_step.c). */
  lk__thunk once;
  bool once_ready;
  lk_closure_fn inner;
  double cached;
  bool evaluated;
  unsigned calls;
  /* Several optimizers, automatic: the other optimizers' gradients kept
   * while one's loss is backpropagated, as Lightning's toggle_optimizer. */
  void **stash;
  size_t n_stash;
} lk__optim;

#endif

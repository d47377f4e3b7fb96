/* The entries the loop calls: the plugins' own functions, or with a
 * profiler the wrappers that time them (profile.c), and the loop's own
 * phases, wrapped the same way. Callers call through the table and never
 * know which. */
#ifndef LK_CALLS_H
#define LK_CALLS_H

#include "profile.h"
#include "registry.h"

typedef struct lk__calls {
  int (*training_step)(void *self, const lk_batch *batch, lk_step_result *out);
  int (*validation_step)(void *self, const lk_batch *batch,
                         lk_step_result *out);
  int (*test_step)(void *self, const lk_batch *batch, lk_step_result *out);
  int (*zero_grad)(void *self, lk_tensor *const *params, size_t n);
  int (*backward)(void *self, const lk_batch *batch, double scale);
  int (*data_epoch)(void *self, lk_split split, uint64_t epoch, size_t *n);
  int (*data_batch)(void *self, lk_split split, size_t index, lk_batch *out);
  int (*train_epoch)(lk_run *run);
  int (*validate)(lk_run *run, lk_split split, bool *ran, lk_step_result *r);
  int (*test)(lk_run *run, lk_split split, bool *ran, lk_step_result *r);
  int (*save)(lk_run *run);
  /* Each logger's log_metrics, in the order of reg.listed. */
  int (*log_metrics[LK__MAX_LISTED])(void *self, uint64_t step, uint64_t epoch,
                                     const lk_metric *metrics, size_t n);
} lk__calls;

/* The loop's entries and phases, every logger's log_metrics, and the
 * optimizers' and schedulers' plugins' steps. */
#define LK__MAX_PROFILED (32 + LK__MAX_LISTED)

typedef struct lk__profiling {
  struct lk__profiled *wrapped[LK__MAX_PROFILED]; /* to free */
  size_t n;
} lk__profiling;

/* Fills run->calls: the plugins' entries, wrapped when there is a
 * profiler. */
int lk__calls_build(lk_run *run);
/* With a profiler, the chain's two closure pointers (chain.c built them)
 * timed as the action "closure". */
int lk__calls_profile_closure(lk_run *run);
void lk__calls_free(lk__profiling *p);

#endif

/* Profiling by wrapping: with a profiler, every plugin entry the host calls
 * (and the host's own phases: an epoch, a validation, a checkpoint save) is
 * replaced by a libffi closure of the same C type that starts the
 * profiler's action, calls the real function with the same arguments and
 * stops the action. Callers keep calling a plain function pointer; without
 * a profiler they hold the real function and nothing is wrapped. */
#ifndef LK_PROFILE_H
#define LK_PROFILE_H

#include "internal.h"

/* The C types of the functions that can be wrapped. */
typedef enum lk__signature {
  LK__SIG_CLOSURE,    /* double (void) */
  LK__SIG_STEP,       /* int (void *, const lk_batch *, lk_step_result *) */
  LK__SIG_ZERO_GRAD,  /* int (void *, lk_tensor *const *, size_t) */
  LK__SIG_BACKWARD,   /* int (void *, const lk_batch *, double) */
  LK__SIG_OPTIMIZER,  /* int (void *, lk_tensor *const *, size_t,
                         lk_closure_fn) */
  LK__SIG_DATA_EPOCH, /* int (void *, lk_split, uint64_t, size_t *) */
  LK__SIG_DATA_BATCH, /* int (void *, lk_split, size_t, lk_batch *) */
  LK__SIG_SCHEDULER,  /* int (void *, lk_interval, const lk_metric *,
                         size_t) */
  LK__SIG_PHASE,      /* int (lk_run *) */
  LK__SIG_EVALUATE,   /* int (lk_run *, lk_split, bool *, lk_step_result *) */
  LK__SIG_LOGGER      /* int (void *, uint64_t, uint64_t, const lk_metric *,
                         size_t) */
} lk__signature;

typedef struct lk__profiled lk__profiled;

/* Wraps REAL, a function of type SIG, as action ID of the profiler whose
 * ops and instance are OPS and SELF. *FN gets the wrapper's code address,
 * to be cast back to SIG's type. */
int lk__profile_wrap(lk__signature sig, void (*real)(void),
                     const lk_profiler_ops *ops, void *self, int id,
                     lk__profiled **out, void **fn);
void lk__profiled_free(lk__profiled *p);

#endif

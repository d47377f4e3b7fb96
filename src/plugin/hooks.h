/* Calling the callbacks' hooks: one dispatcher for every hook (a hook
 * newer than a plugin's minor is NULL in the host's copy of its ops: the
 * ABI guard, kinds.h).
 * Callbacks run in the order [plugins] callbacks lists them, then the
 * model's own (a step plugin that also implements the callback kind). */
#ifndef LK_HOOKS_H
#define LK_HOOKS_H

#include "registry.h"

/* The hooks, in lk_callback_ops order (kinds.c lists the same entries). */
typedef enum lk__hook_id {
  LK__ON_TRAIN_START,
  LK__ON_TRAIN_EPOCH_START,
  LK__ON_TRAIN_BATCH_START,
  LK__ON_BEFORE_ZERO_GRAD,
  LK__ON_BEFORE_BACKWARD,
  LK__ON_AFTER_BACKWARD,
  LK__ON_BEFORE_OPTIMIZER_STEP,
  LK__ON_AFTER_OPTIMIZER_STEP,
  LK__ON_TRAIN_BATCH_END,
  LK__ON_VALIDATION_END,
  LK__ON_TRAIN_EPOCH_END,
  LK__ON_TRAIN_END,
  LK__ON_VALIDATION_START,
  LK__N_HOOKS
} lk__hook_id;

/* What a hook takes besides self; each hook reads its own field. */
typedef struct lk__hook_arg {
  uint64_t epoch;               /* on_train_epoch_start, _end */
  const lk_batch *batch;        /* on_train_batch_start */
  double loss;                  /* on_before_backward */
  const lk_step_result *result; /* on_train_batch_end, on_validation_end */
} lk__hook_arg;

/* Calls hook ID on every callback of REG, in order; the first failure
 * stops it, named "HOOK of plugin NAME". */
int lk__hooks_call(const lk__registry *reg, lk__hook_id id, lk__hook_arg arg);

/* Whether any callback has hook ID (a closure wrapper is needed only then). */
bool lk__hooks_any(const lk__registry *reg, lk__hook_id id);

#endif

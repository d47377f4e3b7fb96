/* Calling the callbacks' hooks (see hooks.h). */
#include "hooks.h"

/* How each hook is called: its arguments after self. */
typedef enum { ARG_NONE, ARG_EPOCH, ARG_BATCH, ARG_LOSS, ARG_RESULT } arg_kind;

static const arg_kind args_of[LK__N_HOOKS] = {
    [LK__ON_TRAIN_START] = ARG_NONE,
    [LK__ON_TRAIN_EPOCH_START] = ARG_EPOCH,
    [LK__ON_TRAIN_BATCH_START] = ARG_BATCH,
    [LK__ON_BEFORE_ZERO_GRAD] = ARG_NONE,
    [LK__ON_BEFORE_BACKWARD] = ARG_LOSS,
    [LK__ON_AFTER_BACKWARD] = ARG_NONE,
    [LK__ON_BEFORE_OPTIMIZER_STEP] = ARG_NONE,
    [LK__ON_AFTER_OPTIMIZER_STEP] = ARG_NONE,
    [LK__ON_TRAIN_BATCH_END] = ARG_RESULT,
    [LK__ON_VALIDATION_END] = ARG_RESULT,
    [LK__ON_TRAIN_EPOCH_END] = ARG_EPOCH,
    [LK__ON_TRAIN_END] = ARG_NONE,
    [LK__ON_VALIDATION_START] = ARG_NONE,
};
_Static_assert(sizeof(lk_callback_ops) == LK__N_HOOKS * sizeof(void (*)(void)),
               "a hook of lk_callback_ops that hooks.h does not list");

static int call(void (*fn)(void), arg_kind kind, void *self, lk__hook_arg a) {
  switch (kind) {
  case ARG_NONE: return ((int (*)(void *))fn)(self);
  case ARG_EPOCH: return ((int (*)(void *, uint64_t))fn)(self, a.epoch);
  case ARG_BATCH: return ((int (*)(void *, const lk_batch *))fn)(self, a.batch);
  case ARG_LOSS: return ((int (*)(void *, double))fn)(self, a.loss);
  case ARG_RESULT:
    return ((int (*)(void *, const lk_step_result *))fn)(self, a.result);
  }
  return 0;
}

int lk__hooks_call(const lk__registry *reg, lk__hook_id id, lk__hook_arg arg) {
  const lk__listed *cbs = &reg->listed[LK__KIND_CALLBACK];
  for (size_t i = 0; i < cbs->n; i++) {
    lk__instance *cb = cbs->in[i];
    void (*fn)(void) = lk__entry_of(cb, LK__KIND_CALLBACK, (size_t)id);
    if (!fn)
      continue;
    uint64_t mark = lk__err_mark();
    int rc = call(fn, args_of[id], cb->self, arg);
    if (rc != 0)
      return lk__entry_failed(rc, mark, "%s of plugin %s",
                              lk__kinds[LK__KIND_CALLBACK].entries[id].name,
                              cb->label);
  }
  return 0;
}

bool lk__hooks_any(const lk__registry *reg, lk__hook_id id) {
  const lk__listed *cbs = &reg->listed[LK__KIND_CALLBACK];
  for (size_t i = 0; i < cbs->n; i++)
    if (lk__entry_of(cbs->in[i], LK__KIND_CALLBACK, (size_t)id))
      return true;
  return false;
}

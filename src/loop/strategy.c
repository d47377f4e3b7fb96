/* Processes: the strategy plugin's view of them (rank and world), the
 * sums the loop reduces over them, and stopping them all when one fails.
 * Without a strategy the run is one process and all of this is a no-op. */
#include "loop.h"

/* Every process but rank 0 logs only errors: rank 0 speaks for the run. */
int lk__strategy_setup(lk_run *run) {
  const lk__instance *s = lk__role(run, LK__KIND_STRATEGY);
  lk__env *env = &run->env;
  if (!s)
    return 0;
  const lk_strategy_ops *ops = s->desc->strategy;
  env->rank = ops->rank ? ops->rank(s->self) : 0;
  env->world = ops->world_size ? ops->world_size(s->self) : 1;
  if (env->world < 1 || env->rank < 0 || env->rank >= env->world)
    return lk__err(LK_EPLUGIN, "strategy %s says rank %d of %d processes",
                   s->name, env->rank, env->world);
  if (env->world > 1 && !ops->reduce_metrics)
    return lk__err(LK_EKIND,
                   "strategy %s runs %d processes but has no reduce_metrics",
                   s->name, env->world);
  if (env->rank != 0 && env->log.verbosity > LK_LOG_ERROR)
    env->log.verbosity = LK_LOG_ERROR;
  if (env->rank != 0)
    run->opts.progress = NULL;
  if (!ops->setup)
    return 0;
  uint64_t mark = lk__err_mark();
  int rc = ops->setup(s->self, env->tensors.params, env->tensors.n_params);
  return rc ? lk__entry_failed(rc, mark, "setup of strategy %s", s->name) : 0;
}

int lk__reduce_sum(lk_run *run, double *values, size_t n) {
  if (run->env.world <= 1 || n == 0)
    return 0;
  const lk__instance *s = lk__role(run, LK__KIND_STRATEGY);
  uint64_t mark = lk__err_mark();
  int rc = s->desc->strategy->reduce_metrics(s->self, values, n);
  return rc ? lk__entry_failed(rc, mark, "reduce_metrics of plugin %s", s->name)
            : 0;
}

void lk__abort_others(lk_run *run, int status, const char *message) {
  const lk__instance *in = lk__role(run, LK__KIND_STRATEGY);
  void (*abort_fn)(void) = in && in->created
                               ? lk__entry_of(in, LK__KIND_STRATEGY,
                                              LK__ENTRY(lk_strategy_ops, abort))
                               : NULL;
  if (!abort_fn)
    return;
  const lk_strategy_ops *ops = in->desc->strategy;
  /* Before setup the run does not know its world yet: ask. */
  int world = run->env.world > 1 ? run->env.world
              : ops->world_size  ? ops->world_size(in->self)
                                 : 1;
  if (world > 1)
    ops->abort(in->self, status, message);
}

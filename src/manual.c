/* Manual optimization: what a step plugin calls to drive the optimizer
 * itself ([loop] manual_optimization = true), valid only inside its
 * training_step. Each call runs the hooks the automatic loop would run
 * around the same work, in the same order. */
#include <string.h>

#include "run_private.h"

static int manual_only(lk_host *host, const char *what) {
  const lk_run *run = host->env->run;
  if (!run || !run->loop.manual || !run->chain.in_training_step)
    return lk__err(LK_ESTATE,
                   "plugin %s called %s outside a training_step with "
                   "manual_optimization = true",
                   host->inst->label, what);
  return 0;
}

int lk_host_zero_grad(lk_host *host) {
  int rc = manual_only(host, "lk_host_zero_grad");
  if (rc != 0)
    return rc;
  lk_run *run = host->env->run;
  const lk__instance *zg = lk__role(run, LK__KIND_ZERO_GRAD);
  const lk__tensors *ts = &run->env.tensors;
  rc =
      lk__hooks_call(&run->env.reg, LK__ON_BEFORE_ZERO_GRAD, (lk__hook_arg){0});
  uint64_t mark = lk__err_mark();
  if (rc == 0 &&
      (rc = run->calls.zero_grad(zg->self, ts->params, ts->n_params)) != 0)
    rc = lk__entry_failed(rc, mark, "zero_grad of plugin %s", zg->name);
  return rc;
}

int lk_host_backward(lk_host *host, const lk_batch *batch, double loss,
                     double scale) {
  int rc = manual_only(host, "lk_host_backward");
  if (rc != 0)
    return rc;
  lk_run *run = host->env->run;
  const lk__instance *bw = lk__role(run, LK__KIND_BACKWARD);
  if (!bw)
    return lk__err(LK_ESTATE, "no backward plugin");
  rc = lk__hooks_call(&run->env.reg, LK__ON_BEFORE_BACKWARD,
                      (lk__hook_arg){.loss = loss});
  uint64_t mark = lk__err_mark();
  if (rc == 0 && (rc = run->calls.backward(bw->self, batch, scale)) != 0)
    rc = lk__entry_failed(rc, mark, "backward of plugin %s", bw->name);
  if (rc == 0)
    rc = lk__chain_after_backward(run);
  return rc;
}

int lk_host_clip_gradients(lk_host *host, double value, const char *algorithm) {
  int rc = manual_only(host, "lk_host_clip_gradients");
  if (rc != 0)
    return rc;
  int algo;
  if (algorithm && strcmp(algorithm, "norm") == 0)
    algo = LK__CLIP_NORM;
  else if (algorithm && strcmp(algorithm, "value") == 0)
    algo = LK__CLIP_VALUE;
  else
    return lk__err(LK_EINVAL,
                   "plugin %s: clip algorithm \"%s\": expected norm or value",
                   host->inst->label, algorithm ? algorithm : "(null)");
  if (!(value >= 0))
    return lk__err(LK_EINVAL, "plugin %s: clip value %g must be >= 0",
                   host->inst->label, value);
  return lk__clip_gradients(&host->env->tensors, value, algo);
}

int lk_host_optimizer_step(lk_host *host, lk_closure_fn closure) {
  int rc = manual_only(host, "lk_host_optimizer_step");
  if (rc != 0)
    return rc;
  lk_run *run = host->env->run;
  const lk__instance *opt = lk__role(run, LK__KIND_OPTIMIZER);
  const lk__tensors *ts = &run->env.tensors;
  if (!opt)
    return lk__err(LK_ESTATE, "no optimizer plugin is configured");
  rc = lk__hooks_call(&run->env.reg, LK__ON_BEFORE_OPTIMIZER_STEP,
                      (lk__hook_arg){0});
  if (rc == 0) {
    run->chain.in_optimizer_step = true;
    uint64_t mark = lk__err_mark();
    rc =
        run->calls.optimizer_step(opt->self, ts->params, ts->n_params, closure);
    run->chain.in_optimizer_step = false;
    if (rc != 0)
      rc = lk__entry_failed(rc, mark, "step of optimizer %s", opt->name);
  }
  if (rc == 0) {
    run->state.progress.global_step++;
    rc = lk__hooks_call(&run->env.reg, LK__ON_AFTER_OPTIMIZER_STEP,
                        (lk__hook_arg){0});
  }
  return rc;
}

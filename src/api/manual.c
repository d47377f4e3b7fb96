/* Manual optimization: what a step plugin calls to drive the optimizers
 * itself ([loop] manual_optimization = true), valid only inside its
 * training_step. Each call runs the hooks the automatic loop would run
 * around the same work, in the same order. With several optimizers (a
 * GAN's generator and discriminator) each is reached by lk_host_optimizer
 * and zeroed, clipped and stepped on its own parameters, as Lightning's
 * self.optimizers(). With a precision plugin, lk_host_backward scales the
 * loss and an optimizer's gradients are unscaled once, when it clips or
 * steps them (a plugin may accumulate several backwards before), as
 * torch's GradScaler.unscale_ and step do; an overflow skips that step. */
#include <math.h>
#include <string.h>

#include "manual.h"

static int manual_only(lk_host *host, const char *what) {
  const lk_run *run = host->env->run;
  if (!run || !run->loop.manual || !run->chain.in_training_step)
    return lk__err(LK_ESTATE,
                   "plugin %s called %s outside a training_step with "
                   "manual_optimization = true",
                   host->inst->label, what);
  return 0;
}

static int zero(lk_run *run, lk_tensor *const *params, size_t n) {
  const lk__instance *zg = lk__role(run, LK__KIND_ZERO_GRAD);
  int rc =
      lk__hooks_call(&run->env.reg, LK__ON_BEFORE_ZERO_GRAD, (lk__hook_arg){0});
  uint64_t mark = lk__err_mark();
  if (rc == 0 && (rc = run->calls.zero_grad(zg->self, params, n)) != 0)
    rc = lk__entry_failed(rc, mark, "zero_grad of plugin %s", zg->name);
  return rc;
}

int lk_host_zero_grad(lk_host *host) {
  int rc = manual_only(host, "lk_host_zero_grad");
  if (rc != 0)
    return rc;
  lk_run *run = host->env->run;
  return zero(run, run->env.tensors.params, run->env.tensors.n_params);
}

int lk_host_backward(lk_host *host, const lk_batch *batch, double loss,
                     double scale) {
  int rc = manual_only(host, "lk_host_backward");
  if (rc != 0)
    return rc;
  lk_run *run = host->env->run;
  const lk__instance *bw = lk__role(run, LK__KIND_BACKWARD);
  const lk__instance *prec = lk__role(run, LK__KIND_PRECISION);
  if (!bw)
    return lk__err(LK_ESTATE, "no backward plugin");
  if (prec) {
    double s;
    if ((rc = lk__chain_loss_scale(run, &s)) != 0)
      return rc;
    scale *= s;
    for (size_t i = 0; i < run->optim.n; i++)
      run->optim.opt[i].unscaled = false;
  }
  rc = lk__hooks_call(&run->env.reg, LK__ON_BEFORE_BACKWARD,
                      (lk__hook_arg){.loss = loss});
  uint64_t mark = lk__err_mark();
  if (rc == 0 && (rc = run->calls.backward(bw->self, batch, scale)) != 0)
    rc = lk__entry_failed(rc, mark, "backward of plugin %s", bw->name);
  if (rc == 0)
    rc = lk__chain_after_backward(run);
  return rc;
}

/* The precision plugin's unscale of OP's gradients, once since the last
 * backward. */
static int unscale_once(lk_run *run, lk__optimizer *op) {
  if (!lk__role(run, LK__KIND_PRECISION) || op->unscaled)
    return 0;
  op->unscaled = true;
  return lk__chain_unscale(run, op->params, op->n_params, &op->skip);
}

static int parse_clip(lk_host *host, double value, const char *algorithm,
                      int *algo) {
  if (algorithm && strcmp(algorithm, "norm") == 0)
    *algo = LK__CLIP_NORM;
  else if (algorithm && strcmp(algorithm, "value") == 0)
    *algo = LK__CLIP_VALUE;
  else
    return lk__err(LK_EINVAL,
                   "plugin %s: clip algorithm \"%s\": expected norm or value",
                   host->inst->label, algorithm ? algorithm : "(null)");
  if (!(value >= 0))
    return lk__err(LK_EINVAL, "plugin %s: clip value %g must be >= 0",
                   host->inst->label, value);
  return 0;
}

int lk_host_clip_gradients(lk_host *host, double value, const char *algorithm) {
  int algo, rc = manual_only(host, "lk_host_clip_gradients");
  if (rc == 0)
    rc = parse_clip(host, value, algorithm, &algo);
  lk_run *run = host->env->run;
  for (size_t i = 0; rc == 0 && i < run->optim.n; i++)
    rc = unscale_once(run, &run->optim.opt[i]);
  return rc ? rc
            : lk__clip_gradients(run->env.tensors.params,
                                 run->env.tensors.n_params, value, algo);
}

/* One step of the run's optimizer OP from training_step: the hooks around
 * it, the unscale (an overflow skips the update), every group, and a step
 * of the run counted. */
static int manual_step(lk_run *run, lk__optimizer *op, lk_closure_fn closure) {
  if (closure && lk__role(run, LK__KIND_PRECISION))
    return lk__err(LK_ECONFIG,
                   "optimizer %s: a step with a closure under precision %s in "
                   "manual optimization: the closure's gradients would not "
                   "be unscaled; step without a closure",
                   op->in->label, lk__role(run, LK__KIND_PRECISION)->label);
  int rc = lk__hooks_call(&run->env.reg, LK__ON_BEFORE_OPTIMIZER_STEP,
                          (lk__hook_arg){0});
  if (rc == 0)
    rc = unscale_once(run, op);
  if (rc == 0 && !(op->unscaled && op->skip)) {
    run->chain.in_optimizer_step = true;
    rc = lk__optim_step(run, op, closure);
    run->chain.in_optimizer_step = false;
  }
  if (rc == 0) {
    run->state.progress.global_step++;
    rc = lk__hooks_call(&run->env.reg, LK__ON_AFTER_OPTIMIZER_STEP,
                        (lk__hook_arg){0});
  }
  return rc;
}

int lk_host_optimizer_step(lk_host *host, lk_closure_fn closure) {
  int rc = manual_only(host, "lk_host_optimizer_step");
  if (rc != 0)
    return rc;
  lk_run *run = host->env->run;
  if (run->optim.n == 0)
    return lk__err(LK_ESTATE, "no optimizer plugin is configured");
  if (run->optim.n > 1)
    return lk__err(LK_ESTATE,
                   "plugin %s: lk_host_optimizer_step with %zu optimizers: "
                   "step each with lk_optimizer_step(lk_host_optimizer(host, "
                   "I), NULL, 0, closure)",
                   host->inst->label, run->optim.n);
  return manual_step(run, &run->optim.opt[0], closure);
}

/* ---- the run's optimizers as handles ------------------------------------- */

size_t lk_host_optimizer_count(lk_host *host) {
  return host->env->run ? host->env->run->optim.n : 0;
}

lk_optimizer *lk_host_optimizer(lk_host *host, size_t i) {
  lk_run *run = host->env->run;
  return run && i < run->optim.n ? (lk_optimizer *)run->optim.opt[i].in : NULL;
}

const char *lk_optimizer_name(const lk_optimizer *opt) {
  return opt ? ((const lk__instance *)opt)->name : NULL;
}

/* OPT as one of the run's optimizers, from training_step, in *OUT. */
static int run_optimizer(lk_optimizer *opt, const char *what,
                         lk__optimizer **out) {
  lk__instance *in = (lk__instance *)opt;
  if (!in)
    return lk__err(LK_EINVAL, "%s: no optimizer", what);
  lk_run *run = in->host.env->run;
  if (!in->optimizer || in->optimizer->in != in || !run)
    return lk__err(LK_EINVAL,
                   "%s: optimizer %s is not one of the run's "
                   "(lk_host_optimizer gives those)",
                   what, in->label);
  if (!run->loop.manual || !run->chain.in_training_step)
    return lk__err(LK_ESTATE,
                   "%s of optimizer %s outside a training_step with "
                   "manual_optimization = true",
                   what, in->label);
  *out = in->optimizer;
  return 0;
}

int lk_optimizer_zero_grad(lk_optimizer *opt) {
  lk__optimizer *op;
  int rc = run_optimizer(opt, "lk_optimizer_zero_grad", &op);
  return rc ? rc : zero(op->in->host.env->run, op->zero_set, op->n_zero);
}

int lk_optimizer_clip_gradients(lk_optimizer *opt, double value,
                                const char *algorithm) {
  lk__optimizer *op;
  int algo, rc = run_optimizer(opt, "lk_optimizer_clip_gradients", &op);
  if (rc == 0)
    rc = parse_clip(&op->in->host, value, algorithm, &algo);
  if (rc == 0)
    rc = unscale_once(op->in->host.env->run, op);
  return rc ? rc : lk__clip_gradients(op->params, op->n_params, value, algo);
}

bool lk__is_run_optimizer(const lk_optimizer *opt) {
  const lk__instance *in = (const lk__instance *)opt;
  return in && in->optimizer && in->optimizer->in == in;
}

int lk__manual_step(lk_optimizer *opt, lk_tensor *const *params, size_t n,
                    lk_closure_fn closure) {
  lk__optimizer *op;
  int rc = run_optimizer(opt, "lk_optimizer_step", &op);
  if (rc != 0)
    return rc;
  if (params && (n != op->n_params ||
                 memcmp(params, op->params, n * sizeof *params) != 0))
    return lk__err(LK_EINVAL,
                   "lk_optimizer_step: optimizer %s steps its own %zu "
                   "parameters: give NULL, 0",
                   op->in->label, op->n_params);
  return manual_step(op->in->host.env->run, op, closure);
}

/* The optimizer's closure, built in one place. One evaluation, in order:
 *
 *   training_step -> [terminate_on_nan: the loss] -> on_before_zero_grad ->
 *   zero_grad -> on_before_backward -> backward (scaled by the precision
 *   plugin's loss scale) -> reduce over the processes -> unscale (an
 *   overflow skips the step) -> on_after_backward -> [terminate_on_nan:
 *   the parameters] -> on_before_optimizer_step -> clip
 *
 * closure.c makes the first part (step, zero_grad, backward and the hooks
 * around them) a plain function pointer; the rest wraps it, each stage
 * only when the run has what it needs, so that a run with no hooks,
 * strategy, precision or clipping calls the bare closure. The failure of
 * any stage is recorded in the closure (one record: lk_closure_consume
 * returns it), and the stage returns NaN, which the optimizer takes as
 * "stop". Manual optimization has neither zero_grad nor backward in the
 * closure: the step plugin calls them through the host (manual.c). */
#include <math.h>
#include <string.h>

#include "loop.h"

/* ---- inside the evaluation ---------------------------------------------- */

static void closure_log(void *user, lk_log_level level, const char *msg) {
  lk__log(user, level, "%s", msg);
}

static int before_zero_grad(void *ctx) {
  lk_run *run = ctx;
  return lk__hooks_call(&run->env.reg, LK__ON_BEFORE_ZERO_GRAD,
                        (lk__hook_arg){0});
}

static int before_backward(void *ctx, double loss) {
  lk_run *run = ctx;
  return lk__hooks_call(&run->env.reg, LK__ON_BEFORE_BACKWARD,
                        (lk__hook_arg){.loss = loss});
}

static int after_backward(void *ctx) {
  return lk__chain_after_backward(ctx);
}

int lk__chain_loss_scale(const lk_run *run, double *s) {
  const lk__instance *p = lk__role(run, LK__KIND_PRECISION);
  *s = p->desc->precision->loss_scale(p->self);
  if (!(*s > 0) || !isfinite(*s))
    return lk__err(LK_EINVAL,
                   "loss_scale of precision %s is %g: expected a finite "
                   "number > 0",
                   p->label, *s);
  return 0;
}

/* Backward through a precision plugin: the loss scaled by its factor. */
static int scaled_backward(void *ctx, const lk_batch *batch, double scale) {
  lk_run *run = ctx;
  double s;
  int rc = lk__chain_loss_scale(run, &s);
  if (rc != 0)
    return rc;
  return run->calls.backward(lk__role(run, LK__KIND_BACKWARD)->self, batch,
                             scale * s);
}

/* The precision plugin brings the gradients back to the loss's scale. If
 * they overflowed, they are zeroed, so that nothing downstream (callbacks,
 * terminate_on_nan, a plain optimizer) sees infinities, and the step is
 * skipped. */
int lk__chain_unscale(lk_run *run, lk_tensor *const *params, size_t n,
                      bool *skip) {
  const lk__instance *p = lk__role(run, LK__KIND_PRECISION);
  uint64_t mark = lk__err_mark();
  *skip = false;
  int rc = p->desc->precision->unscale_gradients(p->self, params, n, skip);
  if (rc != 0)
    return lk__entry_failed(rc, mark, "unscale_gradients of precision %s",
                            p->label);
  for (size_t i = 0; *skip && i < n; i++) {
    lk_tensor *t = params[i];
    if (t->grad)
      memset(t->grad, 0, t->numel * lk_dtype_size(t->dtype));
  }
  return 0;
}

static int unscale(lk_run *run) {
  size_t n;
  lk_tensor *const *params = lk__optim_active_params(run, &n);
  return lk__chain_unscale(run, params, n, &run->chain.precision_skip);
}

/* Inside an accumulation window only the last backward reduces: the sum
 * of the window's gradients is averaged once (as DDP's no_sync does). */
int lk__chain_after_backward(lk_run *run) {
  const lk__instance *s = lk__role(run, LK__KIND_STRATEGY);
  size_t n;
  lk_tensor *const *params = lk__optim_active_params(run, &n);
  bool window_end = !run->chain.accumulating;
  if (window_end && s && s->desc->strategy->reduce_gradients) {
    uint64_t mark = lk__err_mark();
    int rc = s->desc->strategy->reduce_gradients(s->self, params, n);
    if (rc != 0)
      return lk__entry_failed(rc, mark, "reduce_gradients of plugin %s",
                              s->label);
  }
  /* In manual optimization the gradients are unscaled when an optimizer
   * steps or clips them (manual.c): a step plugin may accumulate several
   * backwards first, which must be unscaled once. */
  if (window_end && lk__role(run, LK__KIND_PRECISION) && !run->loop.manual) {
    int rc = unscale(run);
    if (rc != 0)
      return rc;
  }
  return lk__hooks_call(&run->env.reg, LK__ON_AFTER_BACKWARD,
                        (lk__hook_arg){0});
}

/* Several optimizers, automatic: zero_grad clears what the active one
 * clears, and its loss's backward leaves the others' gradients alone. */
static int zero_active(void *ctx, lk_tensor *const *all, size_t n_all) {
  lk_run *run = ctx;
  const lk__instance *zg = lk__role(run, LK__KIND_ZERO_GRAD);
  size_t n;
  lk_tensor *const *params = lk__optim_zero_set(run, &n);
  (void)all;
  (void)n_all;
  return run->calls.zero_grad(zg->self, params, n);
}

static int backward_active(void *ctx, const lk_batch *batch, double scale) {
  lk_run *run = ctx;
  int rc = lk__optim_stash(run, true);
  if (rc != 0)
    return rc;
  if (lk__role(run, LK__KIND_PRECISION))
    rc = scaled_backward(run, batch, scale);
  else
    rc = run->calls.backward(lk__role(run, LK__KIND_BACKWARD)->self, batch,
                             scale);
  int src = lk__optim_stash(run, false);
  return rc ? rc : src;
}

/* ---- around the evaluation ---------------------------------------------- */

/* The optimizer sees NaN for an evaluation whose gradients overflowed: it
 * then leaves the parameters alone. */
static double skip_overflow(void *ctx, double loss) {
  lk_run *run = ctx;
  run->chain.step_skipped = run->chain.precision_skip;
  run->chain.precision_skip = false;
  return run->chain.step_skipped ? NAN : loss;
}

/* After each evaluation the optimizer asks for: on_before_optimizer_step,
 * then clipping, so that every evaluation's gradients are clipped. */
static int before_update(void *ctx, double loss) {
  lk_run *run = ctx;
  (void)loss;
  if (run->chain.step_skipped)
    return 0; /* nothing will be updated: the gradients are zero */
  int rc = lk__hooks_call(&run->env.reg, LK__ON_BEFORE_OPTIMIZER_STEP,
                          (lk__hook_arg){0});
  if (rc == 0 && run->loop.clip_val > 0) {
    size_t n;
    lk_tensor *const *params = lk__optim_active_params(run, &n);
    rc = lk__clip_gradients(params, n, run->loop.clip_val,
                            (int)run->loop.clip_algorithm);
  }
  if (rc != 0)
    lk__closure_fail(run->chain.closure, rc);
  return rc;
}

/* Several processes: the optimizer sees the loss averaged over them, as it
 * sees the gradients, so that every process takes the same decisions (a
 * line search's, a NaN's) and they stay in step. A failed evaluation may
 * have skipped the gradients' reduction: this process leaves the
 * collectives and fails, and its abort stops the others. */
static double mean_loss(void *ctx, double loss) {
  lk_run *run = ctx;
  if (lk__closure_error(run->chain.closure) != 0)
    return NAN;
  double sum = loss;
  int rc = lk__reduce_sum(run, &sum, 1);
  if (rc != 0) {
    lk__closure_fail(run->chain.closure, rc);
    return NAN;
  }
  return sum / run->env.world;
}

/* ---- building it -------------------------------------------------------- */

static int wrap_map(lk__chain *c, lk_closure_fn *fn,
                    double (*map)(void *, double), void *ctx) {
  int rc = lk__closure_map(*fn, map, ctx, &c->wraps[c->n_wraps]);
  if (rc == 0)
    *fn = lk_wrap_function(c->wraps[c->n_wraps++]);
  return rc;
}

static int wrap_then(lk__chain *c, lk_closure_fn *fn,
                     int (*then)(void *, double), void *ctx) {
  int rc = lk_closure_then(*fn, then, ctx, &c->wraps[c->n_wraps]);
  if (rc == 0)
    *fn = lk_wrap_function(c->wraps[c->n_wraps++]);
  return rc;
}

/* Step, zero_grad and backward, with the hooks between them when the run
 * has callbacks, a strategy that reduces or a precision plugin. */
static int evaluation(lk_run *run) {
  const lk__instance *step = lk__role(run, LK__KIND_STEP);
  const lk__instance *zg = lk__role(run, LK__KIND_ZERO_GRAD);
  const lk__instance *bw = lk__role(run, LK__KIND_BACKWARD);
  const lk__instance *opt = lk__role(run, LK__KIND_OPTIMIZER);
  const lk__instance *s = lk__role(run, LK__KIND_STRATEGY);
  lk_closure_parts parts = {
      .step = run->calls.training_step,
      .step_self = step->self,
      .params = run->env.tensors.params,
      .n_params = run->env.tensors.n_params,
      .terminate_on_nan = run->loop.terminate_on_nan,
      .step_name = step->name,
      .zero_grad_name = zg->name,
      .backward_name = bw ? bw->name : "none",
      .log = closure_log,
      .log_user = &run->env,
  };
  if (!run->loop.manual) {
    parts.zero_grad = run->calls.zero_grad;
    parts.zero_grad_self = zg->self;
    parts.backward = run->calls.backward;
    parts.backward_self = bw->self;
    if (lk__role(run, LK__KIND_PRECISION)) {
      parts.backward = scaled_backward;
      parts.backward_self = run;
    }
    if (run->optim.n > 1) {
      parts.zero_grad = zero_active;
      parts.zero_grad_self = run;
      parts.backward = backward_active;
      parts.backward_self = run;
    }
  }
  bool reduce = s && s->desc->strategy->reduce_gradients;
  if (run->env.reg.listed[LK__KIND_CALLBACK].n > 0 || reduce ||
      lk__role(run, LK__KIND_PRECISION)) {
    parts.before_zero_grad = before_zero_grad;
    parts.before_backward = before_backward;
    parts.after_backward = after_backward;
    parts.hook_ctx = run;
  }
  int rc = lk_closure_new(&parts, &run->chain.closure);
  if (rc != 0)
    return rc;
  lk__closure_set_caller(run->chain.closure, opt ? opt->name : "(manual)");
  lk_closure_prepare(run->chain.closure, &run->chain.no_data_batch, 1.0, true,
                     0, 0);
  return 0;
}

int lk__chain_build(lk_run *run) {
  lk__chain *c = &run->chain;
  c->no_data_batch.split = LK_SPLIT_TRAIN;
  int rc = evaluation(run);
  if (rc != 0)
    return rc;
  lk_closure_fn fn = lk_closure_function(c->closure);
  c->plain_closure = fn; /* between the steps of a window: no update follows */
  bool automatic = !run->loop.manual;
  if (rc == 0 && lk__role(run, LK__KIND_PRECISION))
    rc = wrap_map(c, &fn, skip_overflow, run);
  if (rc == 0 && automatic &&
      (run->loop.clip_val > 0 ||
       lk__hooks_any(&run->env.reg, LK__ON_BEFORE_OPTIMIZER_STEP)))
    rc = wrap_then(c, &fn, before_update, run);
  if (rc == 0 && automatic && run->env.world > 1)
    rc = wrap_map(c, &fn, mean_loss, run);
  /* (With a profiler, calls.c then times both closures as a whole.) */
  c->opt_closure = fn;
  return rc;
}

int lk__chain_consume(lk_run *run, lk_step_result *r) {
  int rc = lk_closure_consume(run->chain.closure, r);
  return rc ? rc
            : lk__check_result(r, "training_step",
                               lk__role(run, LK__KIND_STEP)->label);
}

void lk__chain_free(lk__chain *c) {
  /* Closures point into plugin code: the run frees them before any
   * dlclose. */
  for (size_t i = 0; i < c->n_wraps; i++)
    lk_wrap_free(c->wraps[i]);
  c->n_wraps = 0;
  lk_closure_free(c->closure);
  c->closure = NULL;
}

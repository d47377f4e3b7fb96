/* The host API: what a plugin may call through its lk_host handle. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_private.h"

void lk__log(lk_run *run, lk_log_level level, const char *fmt, ...) {
  if (!run->opts.log || level > run->opts.verbosity)
    return;
  char msg[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  run->opts.log(run->opts.log_user, level, msg);
}

void lk_log(lk_host *host, lk_log_level level, const char *fmt, ...) {
  lk_run *run = host->run;
  if (!run->opts.log || level > run->opts.verbosity)
    return;
  char msg[4096];
  int n = snprintf(msg, sizeof msg, "%s: ", host->inst->name);
  va_list ap;
  va_start(ap, fmt);
  if (n > 0 && (size_t)n < sizeof msg)
    vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
  va_end(ap);
  run->opts.log(run->opts.log_user, level, msg);
}

int lk_fail(lk_host *host, int code, const char *fmt, ...) {
  (void)host;
  va_list ap;
  va_start(ap, fmt);
  lk__verr(code < 0 ? code : LK_EPLUGIN, fmt, ap);
  va_end(ap);
  return code < 0 ? code : LK_EPLUGIN;
}

int lk_result_metric(lk_step_result *result, const char *name, double value) {
  if (result->n_metrics == LK_MAX_METRICS)
    return lk__err(LK_EINVAL, "more than %d metrics in one step result",
                   LK_MAX_METRICS);
  result->metrics[result->n_metrics].name = name;
  result->metrics[result->n_metrics].value = value;
  result->n_metrics++;
  return 0;
}

static bool name_taken(lk_tensor **list, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(list[i]->name, name) == 0)
      return true;
  return false;
}

static void free_tensor(lk_tensor *t) {
  if (!t)
    return;
  free((char *)t->name);
  free(t->data);
  free(t->grad);
  free(t);
}

int lk__add_tensor(lk_run *run, lk__instance *inst, const char *name,
                   lk_dtype dtype, size_t ndim, const size_t *shape, bool param,
                   lk_tensor **out) {
  const char *who = inst ? inst->name : "host";
  if (run->setup_done)
    return lk__err(
        LK_ESTATE,
        "plugin %s: %s \"%s\" added after setup (add them in create)", who,
        param ? "parameter" : "state", name);
  if (!name || !*name || ndim > LK_MAX_DIMS ||
      (dtype != LK_F32 && dtype != LK_F64))
    return lk__err(LK_EINVAL,
                   "plugin %s: bad %s \"%s\": needs a name, f32 or f64, at "
                   "most %d dimensions",
                   who, param ? "parameter" : "state", name ? name : "",
                   LK_MAX_DIMS);
  size_t numel = 1;
  for (size_t i = 0; i < ndim; i++) {
    if (shape[i] && numel > SIZE_MAX / shape[i])
      return lk__err(LK_EINVAL, "plugin %s: %s is too large", who, name);
    numel *= shape[i];
  }
  char *full = param ? lk__strdup(name) : lk__asprintf("%s.%s", who, name);
  lk_tensor *t = calloc(1, sizeof *t);
  lk_tensor ***list = param ? &run->params : &run->states;
  size_t *n = param ? &run->n_params : &run->n_states;
  lk_tensor **grown = realloc(*list, (*n + 1) * sizeof **list);
  if (grown)
    *list = grown;
  if (!full || !t || !grown) {
    free(full);
    free(t);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  if (name_taken(run->params, run->n_params, full) ||
      name_taken(run->states, run->n_states, full)) {
    int rc = lk__err(LK_EINVAL, "plugin %s: a tensor named \"%s\" exists", who,
                     full);
    free(full);
    free(t);
    return rc;
  }
  t->name = full;
  t->dtype = dtype;
  t->ndim = ndim;
  for (size_t i = 0; i < ndim; i++)
    t->shape[i] = shape[i];
  t->numel = numel;
  t->data = lk__aligned_calloc(numel, lk_dtype_size(dtype));
  t->grad = param ? lk__aligned_calloc(numel, lk_dtype_size(dtype)) : NULL;
  if (!t->data || (param && !t->grad)) {
    /* The message before the free: it names the tensor. */
    int rc = lk__err(
        LK_ENOMEM, "plugin %s: out of memory for %s %s (%zu elements of %s)",
        who, param ? "parameter" : "state", full, numel, lk_dtype_name(dtype));
    free_tensor(t);
    return rc;
  }
  (*list)[(*n)++] = t;
  *out = t;
  return 0;
}

void lk__free_tensors(lk_run *run) {
  for (size_t i = 0; i < run->n_params; i++)
    free_tensor(run->params[i]);
  for (size_t i = 0; i < run->n_states; i++)
    free_tensor(run->states[i]);
  free(run->params);
  free(run->states);
  run->params = run->states = NULL;
  run->n_params = run->n_states = 0;
}

int lk_host_add_param(lk_host *host, const char *name, lk_dtype dtype,
                      size_t ndim, const size_t *shape, lk_tensor **out) {
  return lk__add_tensor(host->run, host->inst, name, dtype, ndim, shape, true,
                        out);
}

int lk_host_add_state(lk_host *host, const char *name, lk_dtype dtype,
                      size_t ndim, const size_t *shape, lk_tensor **out) {
  return lk__add_tensor(host->run, host->inst, name, dtype, ndim, shape, false,
                        out);
}

int lk_host_add_param_states(lk_host *host, const char *prefix,
                             lk_tensor **out, size_t n) {
  lk_run *run = host->run;
  if (!prefix || !*prefix || !out || n > run->n_params)
    return lk__err(LK_EINVAL,
                   "plugin %s: lk_host_add_param_states(\"%s\", %zu): the run "
                   "has %zu parameters",
                   host->inst->name, prefix ? prefix : "(null)", n,
                   run->n_params);
  for (size_t i = 0; i < n; i++) {
    const lk_tensor *p = run->params[i];
    char *name = lk__asprintf("%s.%s", prefix, p->name);
    if (!name)
      return lk__err(LK_ENOMEM, "out of memory");
    int rc = lk__add_tensor(run, host->inst, name, p->dtype, p->ndim, p->shape,
                            false, &out[i]);
    free(name);
    if (rc != 0)
      return rc;
  }
  return 0;
}

lk_tensor *const *lk_host_params(lk_host *host, size_t *n) {
  *n = host->run->n_params;
  return host->run->params;
}

lk_tensor *const *lk_host_states(lk_host *host, size_t *n) {
  *n = host->run->n_states;
  return host->run->states;
}

int lk_host_rank(lk_host *host) {
  return host->run->rank;
}

int lk_host_world_size(lk_host *host) {
  return host->run->world;
}

lk_rng *lk_host_rng(lk_host *host) {
  return &host->run->rng;
}

uint64_t lk_host_seed(lk_host *host) {
  return host->run->loop.seed;
}

void lk_host_request_stop(lk_host *host) {
  host->run->state.stopped = true;
}

const char *lk_host_run_dir(lk_host *host) {
  return host->run->rd.dir;
}

int lk_state_check(lk_host *host, const lk_tensor *t, double min, double max,
                   bool integer) {
  const char *who = host && host->inst ? host->inst->name : "host";
  if (!t || !t->data)
    return lk__err(LK_EINVAL, "plugin %s: lk_state_check of no tensor", who);
  for (size_t i = 0; i < t->numel; i++) {
    double v = lk__element(t->dtype, t->data, i);
    if (v >= min && v <= max && (!integer || v == floor(v)))
      continue;
    char range[96];
    snprintf(range, sizeof range, "%s in [%.17g, %.17g]",
             integer ? "a whole number" : "a number", min, max);
    return lk__err(LK_EFORMAT, "state %s[%zu] = %.17g: expected %s", t->name, i,
                   v, range);
  }
  return 0;
}

int lk_host_data_shape(lk_host *host, lk_sample_shape *out) {
  lk_run *run = host->run;
  lk__instance *d = run->data;
  if (!out)
    return lk__err(LK_EINVAL, "plugin %s: lk_host_data_shape: OUT is NULL",
                   host->inst->name);
  memset(out, 0, sizeof *out);
  if (!d)
    return lk__err(LK_ENOTFOUND, "plugin %s: this run has no data plugin",
                   host->inst->name);
  if (lk__plugin_minor(d->plugin) < 4 || !d->desc->data->shape)
    return lk__err(LK_ENOTFOUND,
                   "plugin %s: data plugin %s does not say what its samples "
                   "look like",
                   host->inst->name, d->name);
  if (!d->created)
    return lk__err(LK_ESTATE, "plugin %s: data plugin %s is not created yet",
                   host->inst->name, d->name);
  uint64_t mark = lk__err_mark();
  int rc = d->desc->data->shape(d->self, out);
  if (rc != 0)
    return lk__entry_failed(rc, mark, "shape of data plugin %s", d->name);
  if (out->x_ndim > LK_MAX_DIMS || out->y_ndim > LK_MAX_DIMS ||
      lk_dtype_size(out->x_dtype) == 0 ||
      (out->y_dtype != 0 && lk_dtype_size(out->y_dtype) == 0) ||
      (out->n_classes > 0 && (out->y_dtype != LK_I32 || out->y_ndim != 0)))
    return lk__err(LK_EPLUGIN,
                   "shape of data plugin %s: an impossible sample shape "
                   "(x: %zu dimensions of dtype %d; y: %zu of dtype %d)",
                   d->name, out->x_ndim, (int)out->x_dtype, out->y_ndim,
                   (int)out->y_dtype);
  return 0;
}

/* ---- manual optimization ------------------------------------------------ */

static int manual_only(lk_host *host, const char *what) {
  lk_run *run = host->run;
  if (!run->loop.manual || !run->in_training_step)
    return lk__err(LK_ESTATE,
                   "plugin %s called %s outside a training_step with "
                   "manual_optimization = true",
                   host->inst->name, what);
  return 0;
}

int lk_host_zero_grad(lk_host *host) {
  int rc = manual_only(host, "lk_host_zero_grad");
  lk_run *run = host->run;
  if (rc == 0)
    rc = lk__hook(run, offsetof(lk_callback_ops, on_before_zero_grad),
                  "on_before_zero_grad");
  uint64_t mark = lk__err_mark();
  if (rc == 0 && (rc = run->calls.zero_grad(run->zero_grad->self, run->params,
                                            run->n_params)) != 0)
    rc = lk__entry_failed(rc, mark, "zero_grad of plugin %s",
                          run->zero_grad->name);
  return rc;
}

int lk_host_backward(lk_host *host, const lk_batch *batch, double loss,
                     double scale) {
  int rc = manual_only(host, "lk_host_backward");
  lk_run *run = host->run;
  if (rc == 0 && !run->backward)
    rc = lk__err(LK_ESTATE, "no backward plugin");
  if (rc == 0)
    rc = lk__hook_before_backward(run, loss);
  uint64_t mark = lk__err_mark();
  if (rc == 0 &&
      (rc = run->calls.backward(run->backward->self, batch, scale)) != 0)
    rc = lk__entry_failed(rc, mark, "backward of plugin %s",
                          run->backward->name);
  if (rc == 0)
    rc = lk__after_backward(run);
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
                   host->inst->name, algorithm ? algorithm : "(null)");
  if (!(value >= 0))
    return lk__err(LK_EINVAL, "plugin %s: clip value %g must be >= 0",
                   host->inst->name, value);
  return lk__clip_gradients(host->run, value, algo);
}

int lk_host_optimizer_step(lk_host *host, lk_closure_fn closure) {
  int rc = manual_only(host, "lk_host_optimizer_step");
  lk_run *run = host->run;
  if (rc == 0 && !run->optimizer)
    rc = lk__err(LK_ESTATE, "no optimizer plugin is configured");
  if (rc == 0)
    rc = lk__hook(run, offsetof(lk_callback_ops, on_before_optimizer_step),
                  "on_before_optimizer_step");
  if (rc == 0) {
    run->in_optimizer_step = true;
    uint64_t mark = lk__err_mark();
    rc = run->calls.optimizer_step(run->optimizer->self, run->params,
                                   run->n_params, closure);
    run->in_optimizer_step = false;
    if (rc != 0)
      rc = lk__entry_failed(rc, mark, "step of optimizer %s",
                            run->optimizer->name);
  }
  if (rc == 0) {
    run->state.progress.global_step++;
    rc = lk__hook(run, offsetof(lk_callback_ops, on_after_optimizer_step),
                  "on_after_optimizer_step");
  }
  return rc;
}

/* Calls a hook whose only argument is self (by its offset in
 * lk_callback_ops) on every callback, in order. */
int lk__hook(lk_run *run, size_t offset, const char *hook) {
  for (size_t i = 0; i < run->n_callbacks; i++) {
    lk__instance *cb = run->callbacks[i];
    int (*fn)(void *) = NULL;
    /* A plugin built for ABI 1.1 has no on_validation_start to read. */
    if (offset < offsetof(lk_callback_ops, on_validation_start) ||
        lk__plugin_minor(cb->plugin) >= 2)
      memcpy(&fn, (const char *)cb->desc->callback + offset, sizeof fn);
    uint64_t mark = lk__err_mark();
    int rc = fn ? fn(cb->self) : 0;
    if (rc != 0)
      return lk__entry_failed(rc, mark, "%s of plugin %s", hook, cb->name);
  }
  return 0;
}

/* The precision plugin brings the gradients back to the loss's scale. If
 * they overflowed, they are zeroed, so that nothing downstream (callbacks,
 * terminate_on_nan, a plain optimizer) sees infinities, and the step is
 * skipped. */
static int unscale(lk_run *run) {
  bool skip = false;
  lk__instance *p = run->precision;
  uint64_t mark = lk__err_mark();
  int rc = p->desc->precision->unscale_gradients(p->self, run->params,
                                                 run->n_params, &skip);
  if (rc != 0)
    return lk__entry_failed(rc, mark, "unscale_gradients of precision %s",
                            p->name);
  run->precision_skip = skip;
  for (size_t i = 0; skip && i < run->n_params; i++) {
    lk_tensor *t = run->params[i];
    if (t->grad)
      memset(t->grad, 0, t->numel * lk_dtype_size(t->dtype));
  }
  return 0;
}

/* After every backward: the gradients averaged over the processes, then
 * on_after_backward, so that callbacks and clipping see the averages.
 * Inside an accumulation window only the last backward reduces: the sum of
 * the window's gradients is averaged once (as DDP's no_sync does). */
int lk__after_backward(lk_run *run) {
  int rc = 0;
  uint64_t mark = lk__err_mark();
  if (run->strategy && run->strategy->desc->strategy->reduce_gradients &&
      !run->accumulating &&
      (rc = run->strategy->desc->strategy->reduce_gradients(
           run->strategy->self, run->params, run->n_params)) != 0)
    return lk__entry_failed(rc, mark, "reduce_gradients of plugin %s",
                            run->strategy->name);
  if (run->precision && !run->accumulating && (rc = unscale(run)) != 0)
    return rc;
  return lk__hook(run, offsetof(lk_callback_ops, on_after_backward),
                  "on_after_backward");
}

/* Sums N values over the processes (nothing to do in a single one). */
int lk__reduce_sum(lk_run *run, double *values, size_t n) {
  if (run->world <= 1 || n == 0)
    return 0;
  uint64_t mark = lk__err_mark();
  int rc = run->strategy->desc->strategy->reduce_metrics(run->strategy->self,
                                                         values, n);
  return rc ? lk__entry_failed(rc, mark, "reduce_metrics of plugin %s",
                               run->strategy->name)
            : 0;
}

/* A failed process stops the others, which would otherwise wait for it in
 * a collective forever. */
void lk__abort_others(lk_run *run, int status, const char *message) {
  lk__instance *in = run->strategy;
  if (!in || !in->created || lk__plugin_minor(in->plugin) < 2 ||
      !in->desc->strategy->abort)
    return;
  const lk_strategy_ops *ops = in->desc->strategy;
  /* Before setup the run does not know its world yet: ask. */
  int world = run->world > 1    ? run->world
              : ops->world_size ? ops->world_size(in->self)
                                : 1;
  if (world > 1)
    ops->abort(in->self, status, message);
}

int lk__hook_before_backward(lk_run *run, double loss) {
  for (size_t i = 0; i < run->n_callbacks; i++) {
    lk__instance *cb = run->callbacks[i];
    int (*fn)(void *, double) = cb->desc->callback->on_before_backward;
    uint64_t mark = lk__err_mark();
    int rc = fn ? fn(cb->self, loss) : 0;
    if (rc != 0)
      return lk__entry_failed(rc, mark, "on_before_backward of plugin %s",
                              cb->name);
  }
  return 0;
}

/* ---- learning rates and wrapped optimizers ------------------------------- */

const lk_optimizer_ops *lk__optimizer_lr_ops(const lk__instance *in) {
  const lk_optimizer_ops *ops = in->desc->optimizer;
  if (!ops || lk__plugin_minor(in->plugin) < 1 || !ops->get_lr || !ops->set_lr)
    return NULL;
  return ops;
}

double lk_host_lr(lk_host *host) {
  lk__instance *opt = host->run->optimizer;
  const lk_optimizer_ops *ops = opt ? lk__optimizer_lr_ops(opt) : NULL;
  return ops ? ops->get_lr(opt->self) : NAN;
}

int lk_host_set_lr(lk_host *host, double lr) {
  lk__instance *opt = host->run->optimizer;
  const lk_optimizer_ops *ops = opt ? lk__optimizer_lr_ops(opt) : NULL;
  if (!ops)
    return lk__err(LK_ESTATE,
                   "plugin %s: the optimizer has no learning rate to set",
                   host->inst->name);
  if (!isfinite(lr) || lr < 0)
    return lk__err(LK_EINVAL, "plugin %s: learning rate %g is not >= 0",
                   host->inst->name, lr);
  if (!opt->created)
    return lk__err(LK_ESTATE,
                   "plugin %s: the optimizer is not created yet (schedulers "
                   "are created after it)",
                   host->inst->name);
  ops->set_lr(opt->self, lr);
  return 0;
}

int lk_host_optimizer_new(lk_host *host, const char *name, lk_optimizer **out) {
  lk_run *run = host->run;
  if (run->setup_done || !run->src_cfg)
    return lk__err(LK_ESTATE,
                   "plugin %s: lk_host_optimizer_new is only for create",
                   host->inst->name);
  char where[256];
  snprintf(where, sizeof where, "option of plugin %s", host->inst->name);
  lk__instance *in;
  int rc = lk__instance_for(run, name, where, &in);
  if (rc != 0)
    return rc;
  if (in == host->inst || !lk__has_kind(in, "optimizer"))
    return lk__err(LK_EKIND, "plugin %s: %s (%s) cannot be its optimizer",
                   host->inst->name, name, lk_plugin_path(in->plugin));
  if ((rc = lk__instance_create(run, in)) != 0)
    return rc;
  *out = (lk_optimizer *)in;
  return 0;
}

/* In manual optimization every optimizer step the step plugin takes is a
 * step of the run, as Lightning's global_step counts the steps of all
 * optimizers; so max_steps ends a run whose plugin steps only optimizers of
 * its own. A step inside another optimizer's (sam's base) is part of that
 * one. */
int lk_optimizer_step(lk_optimizer *opt, lk_tensor *const *params, size_t n,
                      lk_closure_fn closure) {
  lk__instance *in = (lk__instance *)opt;
  lk_run *run = in->host.run;
  bool outer = run->in_optimizer_step;
  bool counts = run->loop.manual && run->in_training_step && !outer;
  run->in_optimizer_step = true;
  uint64_t mark = lk__err_mark();
  int rc = in->desc->optimizer->step(in->self, params, n, closure);
  run->in_optimizer_step = outer;
  if (rc == 0 && counts)
    run->state.progress.global_step++;
  return rc ? lk__entry_failed(rc, mark, "step of optimizer %s", in->name) : 0;
}

double lk_optimizer_lr(lk_optimizer *opt) {
  const lk_optimizer_ops *ops = lk__optimizer_lr_ops((lk__instance *)opt);
  return ops ? ops->get_lr(((lk__instance *)opt)->self) : NAN;
}

void lk_optimizer_set_lr(lk_optimizer *opt, double lr) {
  const lk_optimizer_ops *ops = lk__optimizer_lr_ops((lk__instance *)opt);
  if (ops)
    ops->set_lr(((lk__instance *)opt)->self, lr);
}

int lk_host_evaluate(lk_host *host, const lk_batch *batch, double *loss) {
  lk_run *run = host->run;
  if (!run->step || !run->step->created)
    return lk__err(LK_ESTATE, "plugin %s: there is no step to evaluate yet",
                   host->inst->name);
  lk_step_result r = {0};
  uint64_t mark = lk__err_mark();
  int rc = run->step->desc->step->training_step(run->step->self, batch, &r);
  if (rc != 0)
    return lk__entry_failed(rc, mark, "training_step of plugin %s",
                            run->step->name);
  *loss = r.has_loss ? r.loss : NAN;
  return 0;
}

/* ---- metrics and checkpoints, for callbacks ------------------------------ */

void lk__metric_seen(lk_run *run, const char *name, double value) {
  lk__loop_state *st = &run->state;
  for (size_t i = 0; i < st->n_latest; i++)
    if (strcmp(st->latest[i].name, name) == 0) {
      st->latest[i].value = value;
      return;
    }
  if (st->n_latest == LK__MAX_COLUMNS)
    return; /* metrics.csv refuses the column anyway */
  snprintf(st->latest[st->n_latest].name, sizeof st->latest[0].name, "%s",
           name);
  st->latest[st->n_latest++].value = value;
}

int lk_host_metric(lk_host *host, const char *name, double *value) {
  const lk__loop_state *st = &host->run->state;
  for (size_t i = 0; name && i < st->n_latest; i++)
    if (strcmp(st->latest[i].name, name) == 0) {
      *value = st->latest[i].value;
      return 0;
    }
  return lk__err(LK_ENOTFOUND, "plugin %s: no metric \"%s\" logged yet",
                 host->inst->name, name ? name : "(null)");
}

int lk_host_log_metric(lk_host *host, const char *name, double value) {
  lk_run *run = host->run;
  if (!name || !lk__column_name_ok(name, strnlen(name, LK__NAME_MAX)))
    return lk__err(LK_EINVAL,
                   "plugin %s: metric name \"%s\" is not a column "
                   "name (1 to %d characters, no comma, quote or newline)",
                   host->inst->name, name ? name : "(null)", LK__NAME_MAX - 1);
  for (size_t i = 0; i < run->n_extra; i++)
    if (strcmp(run->extra[i].name, name) == 0) {
      run->extra[i].value = value;
      return 0;
    }
  if (run->n_extra == LK__MAX_EXTRA)
    return lk__err(LK_EINVAL,
                   "plugin %s: more than %d metrics logged for one "
                   "row",
                   host->inst->name, LK__MAX_EXTRA);
  snprintf(run->extra[run->n_extra].name, sizeof run->extra[0].name, "%s",
           name);
  run->extra[run->n_extra++].value = value;
  return 0;
}

void lk_host_progress(lk_host *host, uint64_t *epoch, uint64_t *global_step) {
  if (epoch)
    *epoch = host->run->state.progress.epoch;
  if (global_step)
    *global_step = host->run->state.progress.global_step;
}

int lk_host_save_checkpoint(lk_host *host, const char *file) {
  return lk__rundir_request(host->run, host->inst->name, file);
}

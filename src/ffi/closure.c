/* The closure: one evaluation of the model behind a plain function pointer.
 *
 * Order (docs/architecture.md, "The life of one batch"): step, the loss check,
 * zero_grad, backward, the parameter check; the result is cached for the loop
 * to consume once. The handler is the hot path of every optimizer: it does no
 * allocation and formats messages only when something fails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "closures.h"
#include "thunk.h"

struct lk_closure {
  lk_closure_parts p;
  lk__thunk thunk;

  /* What the next evaluations work on (lk_closure_prepare). */
  const lk_batch *batch;
  double divisor;
  double scale; /* 1 / divisor */
  bool zero_grad;
  uint64_t epoch, batch_index;

  lk_step_result result;
  bool fresh;    /* evaluated since the last prepare or consume */
  bool consumed; /* consumed since the last prepare */
  bool warned_no_loss;
  int err;
  char errmsg[1024];
  uint64_t calls;
  const char *caller;
};

/* The closure's own finding (a non-finite loss or parameter): the message
 * says it all. */
static double fail_check(lk_closure *c, const char *fmt, ...) LK_PRINTF(2, 3);

static double fail_check(lk_closure *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
  va_end(ap);
  c->err = LK_ENONFINITE;
  return NAN;
}

/* A part that failed after MARK: WHAT names it and lk_last_error() has its
 * reason, whatever the code (a plugin may fail with LK_ENONFINITE too), or
 * says that the part gave none. */
static double fail(lk_closure *c, int code, uint64_t mark, const char *fmt, ...)
    LK_PRINTF(4, 5);

static double fail(lk_closure *c, int code, uint64_t mark, const char *fmt,
                   ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  c->err = lk__entry_failed(code, mark, "%s", what);
  snprintf(c->errmsg, sizeof c->errmsg, "%s", lk_last_error());
  return NAN;
}

/* A non-finite value in any parameter or gradient, named. */
static double check_params(lk_closure *c) {
  for (size_t i = 0; i < c->p.n_params; i++) {
    const lk_tensor *t = c->p.params[i];
    long at = lk__first_nonfinite(t->dtype, t->data, t->numel);
    if (at >= 0)
      return fail_check(
          c,
          "non-finite parameter %s[%ld] = %g after backward (epoch "
          "%llu, batch %llu)",
          t->name, at, lk__element(t->dtype, t->data, (size_t)at),
          (unsigned long long)c->epoch, (unsigned long long)c->batch_index);
    at = t->grad ? lk__first_nonfinite(t->dtype, t->grad, t->numel) : -1;
    if (at >= 0)
      return fail_check(c,
                        "non-finite gradient of parameter %s[%ld] = %g after "
                        "backward (epoch %llu, batch %llu)",
                        t->name, at, lk__element(t->dtype, t->grad, (size_t)at),
                        (unsigned long long)c->epoch,
                        (unsigned long long)c->batch_index);
  }
  return 0;
}

static double evaluate(lk_closure *c) {
  const lk_closure_parts *p = &c->p;
  lk_step_result *r = &c->result;
  int rc;

  c->calls++;
  c->fresh = true;
  c->err = 0;
  r->has_loss = false;
  r->n_metrics = 0;

  uint64_t mark = lk__err_mark();
  if ((rc = p->step(p->step_self, c->batch, r)) != 0)
    return fail(c, rc, mark, "training_step of plugin %s", p->step_name);
  /* The result is the plugin's: the loop indexes arrays with its count. */
  if (r->n_metrics > LK_MAX_METRICS) {
    size_t n = r->n_metrics;
    r->n_metrics = 0;
    return fail(c,
                lk__err(LK_EPLUGIN,
                        "returned %zu metrics, at most %d (LK_MAX_METRICS)", n,
                        LK_MAX_METRICS),
                mark, "training_step of plugin %s", p->step_name);
  }
  if (r->has_loss) {
    r->loss /= c->divisor;
    if (p->terminate_on_nan && !isfinite(r->loss))
      return fail_check(c,
                        "non-finite loss %g at epoch %llu, batch %llu "
                        "(terminate_on_nan)",
                        r->loss, (unsigned long long)c->epoch,
                        (unsigned long long)c->batch_index);
  } else if (!c->warned_no_loss) {
    c->warned_no_loss = true;
    if (p->log)
      p->log(p->log_user, LK_LOG_WARN,
             "training_step returned no loss: backward and the optimizer "
             "step are skipped for such batches");
  }

  if (c->zero_grad && p->zero_grad) {
    mark = lk__err_mark();
    if (p->before_zero_grad && (rc = p->before_zero_grad(p->hook_ctx)) != 0)
      return fail(c, rc, mark, "on_before_zero_grad");
    mark = lk__err_mark();
    if ((rc = p->zero_grad(p->zero_grad_self, p->params, p->n_params)) != 0)
      return fail(c, rc, mark, "zero_grad of plugin %s", p->zero_grad_name);
  }

  if (p->backward && r->has_loss) {
    mark = lk__err_mark();
    if (p->before_backward &&
        (rc = p->before_backward(p->hook_ctx, r->loss)) != 0)
      return fail(c, rc, mark, "on_before_backward");
    mark = lk__err_mark();
    if ((rc = p->backward(p->backward_self, c->batch, c->scale)) != 0)
      return fail(c, rc, mark, "backward of plugin %s", p->backward_name);
    mark = lk__err_mark();
    if (p->after_backward && (rc = p->after_backward(p->hook_ctx)) != 0)
      return fail(c, rc, mark, "on_after_backward");
  }

  if (p->terminate_on_nan && check_params(c) != 0)
    return NAN;
  return r->has_loss ? r->loss : NAN;
}

static void handler(ffi_cif *cif, void *ret, void **args, void *user) {
  (void)cif;
  (void)args;
  *(double *)ret = evaluate(user);
}

int lk_closure_new(const lk_closure_parts *parts, lk_closure **out) {
  if (!parts || !parts->step || !out)
    return lk__err(LK_EINVAL, "lk_closure_new: a closure needs a step");
  lk_closure *c = calloc(1, sizeof *c);
  if (!c)
    return lk__err(LK_ENOMEM, "out of memory");
  c->p = *parts;
  if (!c->p.step_name)
    c->p.step_name = "?";
  if (!c->p.zero_grad_name)
    c->p.zero_grad_name = "?";
  if (!c->p.backward_name)
    c->p.backward_name = "?";
  c->divisor = c->scale = 1.0;
  c->zero_grad = true;
  c->caller = "?";
  int rc = lk__thunk_init(&c->thunk, handler, c, "lk_closure_new");
  if (rc != 0) {
    free(c);
    return rc;
  }
  *out = c;
  return 0;
}

void lk_closure_free(lk_closure *c) {
  if (!c)
    return;
  lk__thunk_free(&c->thunk);
  free(c);
}

lk_closure_fn lk_closure_function(const lk_closure *c) {
  return c->thunk.fn;
}

void lk_closure_prepare(lk_closure *c, const lk_batch *batch, double divisor,
                        bool zero_grad, uint64_t epoch, uint64_t batch_index) {
  c->batch = batch;
  c->divisor = divisor >= 1.0 ? divisor : 1.0;
  c->scale = 1.0 / c->divisor;
  c->zero_grad = zero_grad;
  c->epoch = epoch;
  c->batch_index = batch_index;
  c->fresh = false;
  c->consumed = false;
}

int lk_closure_consume(lk_closure *c, lk_step_result *out) {
  if (!c->fresh) {
    if (c->consumed)
      return lk__err(LK_ESTATE,
                     "the closure's result was already consumed (consume "
                     "once per evaluation)");
    return lk__err(LK_ESTATE,
                   "optimizer %s returned without calling the "
                   "closure",
                   c->caller);
  }
  c->fresh = false;
  c->consumed = true;
  if (c->err != 0)
    return lk__err(c->err, "%s", c->errmsg);
  if (out)
    *out = c->result;
  return 0;
}

uint64_t lk__closure_calls(const lk_closure *c) {
  return c->calls;
}

void lk__closure_set_caller(lk_closure *c, const char *optimizer_name) {
  c->caller = optimizer_name ? optimizer_name : "?";
}

int lk__closure_error(const lk_closure *c) {
  return c->err;
}

int lk__closure_fail(lk_closure *c, int code) {
  if (c->err == 0) { /* the first failure explains the rest */
    c->err = code;
    snprintf(c->errmsg, sizeof c->errmsg, "%s", lk_last_error());
  }
  return code;
}

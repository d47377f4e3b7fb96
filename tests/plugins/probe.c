/* probe: a test model, zero_grad, optimizer and callback in one plugin that
 * writes every call it receives to a trace file, one line each, so tests
 * can check the closure's order, accumulation and manual optimization.
 * loss = k/2 * sum(w^2) (gradient k*w), or a constant gradient `grad`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <loopkit/loopkit.h>

typedef struct probe {
  lk_host *host;
  lk_tensor *w;
  FILE *trace;
  double k, lr, grad, manual_clip;
  int64_t evals, nan_loss_at, nan_param_at, fail_at, fail_rank, calls, delay_us;
  int64_t silent_fail_at;
  bool no_loss, manual;
  const char *bad_result; /* what a training_step gets wrong, for tests */
  const char *init_late;  /* init file to load (wrongly) in training_step */
} probe;

static void say(probe *p, const char *fmt, ...) LK_PRINTF(2, 3);
static void say(probe *p, const char *fmt, ...) {
  if (!p->trace)
    return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(p->trace, fmt, ap);
  va_end(ap);
  fputc('\n', p->trace);
  fflush(p->trace);
}

static int create(lk_host *host, const lk_options *o, void **self) {
  probe *p = calloc(1, sizeof *p);
  if (!p)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  p->host = host;
  p->k = lk_opt_double(o, "k");
  p->lr = lk_opt_double(o, "lr");
  p->grad = lk_opt_double(o, "grad");
  p->manual_clip = lk_opt_double(o, "manual_clip");
  p->evals = lk_opt_int(o, "evals");
  p->nan_loss_at = lk_opt_int(o, "nan_loss_at");
  p->nan_param_at = lk_opt_int(o, "nan_param_at");
  p->fail_at = lk_opt_int(o, "fail_at");
  p->fail_rank = lk_opt_int(o, "fail_rank");
  p->delay_us = lk_opt_int(o, "delay_us");
  p->silent_fail_at = lk_opt_int(o, "silent_fail_at");
  p->bad_result = lk_opt_string(o, "bad_result");
  p->no_loss = lk_opt_bool(o, "no_loss");
  p->manual = lk_opt_bool(o, "manual");
  const char *trace = lk_opt_string(o, "trace");
  if (*trace && !(p->trace = fopen(trace, "a"))) {
    free(p);
    return lk_fail(host, LK_EIO, "cannot open trace %s", trace);
  }
  size_t n = (size_t)lk_opt_int(o, "n");
  int rc = lk_host_add_param(host, "w", LK_F64, 1, &n, &p->w);
  if (rc != 0) {
    if (p->trace)
      fclose(p->trace);
    free(p);
    return rc;
  }
  for (size_t i = 0; i < n; i++)
    ((double *)p->w->data)[i] = lk_opt_double(o, "w0");
#if LK_ABI_MINOR >= 4
  /* init: w from a safetensors file, skipping the names in init_ignore (a
   * comma list). */
  const char *init = lk_opt_string(o, "init");
  if (*init && !lk_opt_bool(o, "init_late")) {
    char ignore_buf[256];
    const char *ignore[9] = {NULL};
    snprintf(ignore_buf, sizeof ignore_buf, "%s",
             lk_opt_string(o, "init_ignore"));
    size_t k = 0;
    for (char *tok = strtok(ignore_buf, ","); tok && k < 8;
         tok = strtok(NULL, ","))
      ignore[k++] = tok;
    if ((rc = lk_host_load_params(host, init, ignore)) != 0) {
      if (p->trace)
        fclose(p->trace);
      free(p);
      return rc;
    }
  }
  p->init_late = *init && lk_opt_bool(o, "init_late") ? init : NULL;
  if (lk_opt_bool(o, "say_threads"))
    say(p, "threads=%d", lk_host_threads(host));
#endif
  *self = p;
  return 0;
}

static void destroy(void *self) {
  probe *p = self;
  if (p->trace)
    fclose(p->trace);
  free(p);
}

static double loss_of(const probe *p) {
  const double *w = p->w->data;
  double s = 0;
  for (size_t i = 0; i < p->w->numel; i++)
    s += w[i] * w[i];
  return 0.5 * p->k * s;
}

static int training_step(void *self, const lk_batch *b, lk_step_result *out) {
  probe *p = self;
  int64_t call = p->calls++;
  say(p, "training_step batch=%zu", b->index);
  if (p->delay_us > 0) { /* a slow model, for tests that kill a run */
    struct timespec ts = {p->delay_us / 1000000,
                          (long)(p->delay_us % 1000000) * 1000};
    nanosleep(&ts, NULL);
  }
  if (call == p->fail_at &&
      (p->fail_rank < 0 || p->fail_rank == lk_host_rank(p->host)))
    return lk_fail(p->host, LK_EPLUGIN, "probe failing on purpose at call %lld",
                   (long long)call);
  if (call == p->silent_fail_at)
    return LK_EPLUGIN; /* without lk_fail: the host must say so */
#if LK_ABI_MINOR >= 4
  if (p->init_late) {
    int rc = lk_host_load_params(p->host, p->init_late, NULL);
    if (rc != 0)
      return rc;
  }
#endif
  lk_result_metric(out, "w0", ((double *)p->w->data)[0]);
  /* Results a careless plugin might return: the host must refuse them. */
  if (!strcmp(p->bad_result, "count"))
    out->n_metrics = LK_MAX_METRICS + 5;
  else if (!strcmp(p->bad_result, "comma"))
    lk_result_metric(out, "a,b", 1);
  else if (!strcmp(p->bad_result, "newline"))
    lk_result_metric(out, "a\nb", 1);
  else if (!strcmp(p->bad_result, "null"))
    lk_result_metric(out, NULL, 1);
  else if (!strcmp(p->bad_result, "reserved"))
    lk_result_metric(out, "epoch", 1);
  else if (!strcmp(p->bad_result, "twice"))
    lk_result_metric(out, "w0", 2);
  if (p->no_loss)
    return 0;
  out->has_loss = true;
  out->loss = call == p->nan_loss_at ? NAN : loss_of(p);
  /* After the loss, so that only the parameter check can see it. */
  if (call == p->nan_param_at)
    ((double *)p->w->data)[p->w->numel - 1] = NAN;
  if (p->manual) {
    int rc = lk_host_zero_grad(p->host);
    if (rc == 0)
      rc = lk_host_backward(p->host, b, out->loss, 1.0);
    if (rc == 0 && p->manual_clip > 0)
      rc = lk_host_clip_gradients(p->host, p->manual_clip, "norm");
    if (rc == 0)
      rc = lk_host_optimizer_step(p->host, NULL);
    return rc;
  }
  return 0;
}

static int backward(void *self, const lk_batch *b, double scale) {
  probe *p = self;
  (void)b;
  say(p, "backward scale=%g", scale);
  double *w = p->w->data, *g = p->w->grad;
  for (size_t i = 0; i < p->w->numel; i++)
    g[i] += scale * (p->grad != 0 ? p->grad : p->k * w[i]);
  return 0;
}

static int zero_grad(void *self, lk_tensor *const *params, size_t n) {
  say(self, "zero_grad");
  for (size_t i = 0; i < n; i++)
    memset(params[i]->grad, 0,
           params[i]->numel * lk_dtype_size(params[i]->dtype));
  return 0;
}

static int step(void *self, lk_tensor *const *params, size_t n,
                lk_closure_fn closure) {
  probe *p = self;
  for (int64_t e = 0; closure && e < p->evals; e++) {
    double loss = closure();
    say(p, "closure -> %.17g", loss);
    if (!isfinite(loss))
      return 0;
  }
  say(p, "optimizer_step");
  for (size_t i = 0; i < n; i++) {
    double *w = params[i]->data, *g = params[i]->grad;
    for (size_t k = 0; k < params[i]->numel; k++)
      w[k] -= p->lr * g[k];
  }
  return 0;
}

static int hook(void *self, const char *name) {
  say(self, "model:%s", name);
  return 0;
}
static int on_train_batch_start(void *s, const lk_batch *b) {
  (void)b;
  return hook(s, "on_train_batch_start");
}
static int on_before_zero_grad(void *s) {
  return hook(s, "on_before_zero_grad");
}
static int on_before_backward(void *s, double loss) {
  (void)loss;
  return hook(s, "on_before_backward");
}
static int on_after_backward(void *s) {
  return hook(s, "on_after_backward");
}
static int on_before_optimizer_step(void *s) {
  return hook(s, "on_before_optimizer_step");
}
static int on_after_optimizer_step(void *s) {
  return hook(s, "on_after_optimizer_step");
}
static int on_train_batch_end(void *s, const lk_step_result *r) {
  (void)r;
  return hook(s, "on_train_batch_end");
}

static const lk_option options[] = {
    {"n", LK_OPT_INT, "2", "number of weights", NULL},
    {"w0", LK_OPT_DOUBLE, "1", "initial value of every weight", NULL},
    {"k", LK_OPT_DOUBLE, "1", "curvature: loss = k/2 * sum(w^2)", NULL},
    {"grad", LK_OPT_DOUBLE, "0", "if non-zero, a constant gradient", NULL},
    {"lr", LK_OPT_DOUBLE, "0.1", "optimizer: w -= lr * grad", NULL},
    {"evals", LK_OPT_INT, "1", "closure calls per optimizer step", NULL},
    {"nan_loss_at", LK_OPT_INT, "-1", "training_step call giving NaN", NULL},
    {"nan_param_at", LK_OPT_INT, "-1", "training_step call setting w[n-1] NaN",
     NULL},
    {"fail_at", LK_OPT_INT, "-1", "training_step call that fails", NULL},
    {"fail_rank", LK_OPT_INT, "-1",
     "with fail_at: fail only on this rank (-1: every rank)", NULL},
    {"no_loss", LK_OPT_BOOL, "false", "training_step gives no loss", NULL},
    {"manual", LK_OPT_BOOL, "false", "drive the optimizer from the step", NULL},
    {"manual_clip", LK_OPT_DOUBLE, "0", "manual: clip grad norm to this", NULL},
    {"delay_us", LK_OPT_INT, "0", "sleep this long in each training_step",
     NULL},
    {"trace", LK_OPT_STRING, "", "file that receives one line per call", NULL},
    {"init", LK_OPT_STRING, "", "safetensors file w is loaded from (ABI 1.4)",
     NULL},
    {"init_ignore", LK_OPT_STRING, "",
     "comma list of init's tensors that are no parameter", NULL},
    {"init_late", LK_OPT_BOOL, "false",
     "load init in training_step instead of create (refused)", NULL},
    {"say_threads", LK_OPT_BOOL, "false",
     "create traces threads=lk_host_threads()", NULL},
    {"silent_fail_at", LK_OPT_INT, "-1",
     "training_step call that fails without lk_fail", NULL},
    {"bad_result", LK_OPT_STRING, "",
     "a malformed result: count, comma, newline, null, reserved, twice", NULL},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_step_ops step_ops = {.training_step = training_step};
static const lk_backward_ops backward_ops = {.backward = backward};
static const lk_zero_grad_ops zero_grad_ops = {.zero_grad = zero_grad};
static const lk_optimizer_ops optimizer_ops = {.step = step};
static const lk_callback_ops callback_ops = {
    .on_train_batch_start = on_train_batch_start,
    .on_before_zero_grad = on_before_zero_grad,
    .on_before_backward = on_before_backward,
    .on_after_backward = on_after_backward,
    .on_before_optimizer_step = on_before_optimizer_step,
    .on_after_optimizer_step = on_after_optimizer_step,
    .on_train_batch_end = on_train_batch_end,
};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "probe",
    .version = "1.0",
    .summary = "test plugin that traces every call it receives",
    .options = options,
    .create = create,
    .destroy = destroy,
    .step = &step_ops,
    .backward = &backward_ops,
    .zero_grad = &zero_grad_ops,
    .optimizer = &optimizer_ops,
    .callback = &callback_ops,
};

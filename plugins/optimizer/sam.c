/* sam: sharpness-aware minimization (Foret et al., 2021) around a base
 * optimizer named in its options. One step evaluates the closure twice: at
 * the current point w, for the gradient g, then at w + e with
 * e = rho * g / ||g|| (adaptive: e_i = rho * w_i^2 g_i / ||w g||), for the
 * gradient the base optimizer then applies at w. It is the closure that
 * makes this possible without the model knowing: each evaluation runs
 * zero_grad and backward again. The loop keeps the second evaluation's
 * result, as it keeps the last of any optimizer's evaluations. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

#include "bundled.h"

typedef struct sam {
  lk_host *host;
  lk_optimizer *base;
  double rho;
  bool adaptive;
  size_t n;
  double **e; /* the perturbation of each parameter, kept to undo it */
} sam;

static void destroy(void *self) {
  sam *s = self;
  for (size_t i = 0; s->e && i < s->n; i++)
    free(s->e[i]);
  free(s->e);
  free(s);
}

static int create(lk_host *host, const lk_options *o, void **self) {
  sam *s = calloc(1, sizeof *s);
  if (!s)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  s->host = host;
  s->rho = lk_opt_double(o, "rho");
  s->adaptive = lk_opt_bool(o, "adaptive");
  lk_tensor *const *params = lk_host_params(host, &s->n);
  s->e = calloc(s->n ? s->n : 1, sizeof *s->e);
  int rc = s->e ? 0 : lk_fail(host, LK_ENOMEM, "out of memory");
  for (size_t i = 0; rc == 0 && i < s->n; i++)
    if (!(s->e[i] =
              calloc(params[i]->numel ? params[i]->numel : 1, sizeof(double))))
      rc = lk_fail(host, LK_ENOMEM, "out of memory");
  if (rc == 0)
    rc = lk_host_optimizer_new(host, lk_opt_string(o, "base"), &s->base);
  if (rc != 0) {
    destroy(s);
    return rc;
  }
  *self = s;
  return 0;
}

static double value(const lk_tensor *t, const void *buf, size_t k) {
  return t->dtype == LK_F64 ? ((const double *)buf)[k]
                            : (double)((const float *)buf)[k];
}

static void add(lk_tensor *t, size_t k, double v) {
  if (t->dtype == LK_F64)
    ((double *)t->data)[k] += v;
  else
    ((float *)t->data)[k] += (float)v;
}

static int step(void *self, lk_tensor *const *params, size_t n,
                lk_closure_fn closure) {
  sam *s = self;
  if (!closure)
    return lk_fail(s->host, LK_EINVAL,
                   "sam evaluates the model twice per step: it needs a "
                   "closure");
  if (n != s->n)
    return lk_fail(s->host, LK_ESTATE,
                   "called with %zu parameters, created "
                   "with %zu",
                   n, s->n);
  if (!isfinite(closure()))
    return 0;
  double sq = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < params[i]->numel; k++) {
      double g = value(params[i], params[i]->grad, k);
      double w = s->adaptive ? fabs(value(params[i], params[i]->data, k)) : 1;
      sq += (w * g) * (w * g);
    }
  double scale = s->rho / (sqrt(sq) + 1e-12);
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < params[i]->numel; k++) {
      double w = value(params[i], params[i]->data, k);
      double e = (s->adaptive ? w * w : 1) *
                 value(params[i], params[i]->grad, k) * scale;
      s->e[i][k] = e;
      add(params[i], k, e);
    }
  double loss = closure(); /* the gradient at the perturbed point */
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < params[i]->numel; k++)
      add(params[i], k, -s->e[i][k]);
  if (!isfinite(loss))
    return 0;
  return lk_optimizer_step(s->base, params, n, NULL);
}

static double get_lr(void *self) {
  return lk_optimizer_lr(((sam *)self)->base);
}

static void set_lr(void *self, double lr) {
  lk_optimizer_set_lr(((sam *)self)->base, lr);
}

static const lk_option options[] = {
    {"base", LK_OPT_STRING, "sgd",
     "the optimizer that takes the step (its options in its own section)",
     NULL},
    {"rho", LK_OPT_DOUBLE, "0.05", "radius of the neighbourhood", "[0, inf)"},
    {"adaptive", LK_OPT_BOOL, "false",
     "ASAM: scale the perturbation by each weight's magnitude", NULL},
    {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_OPTIMIZER(
    "sam", "sharpness-aware minimization around a base optimizer", destroy,
    NULL, .step = step, .get_lr = get_lr, .set_lr = set_lr);

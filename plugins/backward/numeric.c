/* numeric: a backward for any model, by central finite differences of the
 * step's loss (lk_host_evaluate). For every element w of every parameter
 * it evaluates the loss at w + h and w - h, h = 1e-6 (f64) or 3e-3 (f32)
 * times max(1, |w|), and adds scale * (L+ - L-) / (w+ - w-) to the
 * gradient, dividing by the step between the values actually stored (f32
 * rounds w +- h). Two forward passes per parameter element: slow by
 * design, a reference to check or stand in for an analytic backward on
 * small models, never a way to train a real one. */
#include <math.h>

#include <loopkit/loopkit.h>

#include "bundled.h"

static int create(lk_host *host, const lk_options *o, void **self) {
  (void)o;
  *self = host;
  return 0;
}

static void destroy(void *self) {
  (void)self;
}

/* Stores V in element K and returns the value actually stored. */
static double put(lk_tensor *t, size_t k, double v) {
  if (t->dtype == LK_F64)
    return ((double *)t->data)[k] = v;
  return ((float *)t->data)[k] = (float)v;
}

static int backward(void *self, const lk_batch *batch, double scale) {
  lk_host *host = self;
  size_t n;
  lk_tensor *const *params = lk_host_params(host, &n);
  for (size_t i = 0; i < n; i++) {
    lk_tensor *t = params[i];
    if (t->dtype != LK_F32 && t->dtype != LK_F64)
      return lk_fail(host, LK_EINVAL, "parameter %s: %s is not differentiable",
                     t->name, lk_dtype_name(t->dtype));
    bool f64 = t->dtype == LK_F64;
    for (size_t k = 0; k < t->numel; k++) {
      double w = f64 ? ((double *)t->data)[k] : ((float *)t->data)[k];
      double h = (f64 ? 1e-6 : 3e-3) * (fabs(w) > 1 ? fabs(w) : 1), up, down;
      double wp = put(t, k, w + h);
      int rc = lk_host_evaluate(host, batch, &up);
      double wm = put(t, k, w - h);
      if (rc == 0)
        rc = lk_host_evaluate(host, batch, &down);
      put(t, k, w); /* exact: w came from this very element */
      if (rc != 0)
        return rc;
      double g = scale * (up - down) / (wp - wm);
      if (f64)
        ((double *)t->grad)[k] += g;
      else
        ((float *)t->grad)[k] += (float)g;
    }
  }
  return 0;
}

static const lk_option options[] = {{NULL, 0, NULL, NULL, NULL}};

static const lk_backward_ops backward_ops = {.backward = backward};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor =
    BUNDLED_PLUGIN("numeric",
                   "backward by central differences of the step's loss (slow: "
                   "two forwards per parameter element)",
                   destroy, NULL, .backward = &backward_ops);

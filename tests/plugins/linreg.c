/* linreg: a test model for batches, y ~ x.weight + bias with mean squared
 * error; validation_step reports the loss and an "mae" metric. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

typedef struct linreg {
  lk_tensor *weight, *bias;
  double *residual; /* of the last training batch, for backward */
  size_t cap;
} linreg;

static int create(lk_host *host, const lk_options *o, void **self) {
  linreg *m = calloc(1, sizeof *m);
  if (!m)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  size_t f = (size_t)lk_opt_int(o, "features"), one = 1;
  int rc = lk_host_add_param(host, "weight", LK_F64, 1, &f, &m->weight);
  if (rc == 0)
    rc = lk_host_add_param(host, "bias", LK_F64, 1, &one, &m->bias);
  if (rc != 0) {
    free(m);
    return rc;
  }
  *self = m;
  return 0;
}

static void destroy(void *self) {
  linreg *m = self;
  free(m->residual);
  free(m);
}

static int forward(linreg *m, const lk_batch *b, lk_step_result *out,
                   bool keep) {
  size_t n = b->size, f = m->weight->numel;
  if (b->x.dtype != LK_F64 || b->x.ndim != 2 || b->x.shape[1] != f)
    return LK_EINVAL;
  if (keep && n > m->cap) {
    double *r = realloc(m->residual, n * sizeof *r);
    if (!r)
      return LK_ENOMEM;
    m->residual = r;
    m->cap = n;
  }
  const double *x = b->x.data, *y = b->y.data, *w = m->weight->data;
  double loss = 0, mae = 0;
  for (size_t i = 0; i < n; i++) {
    double p = ((double *)m->bias->data)[0];
    for (size_t k = 0; k < f; k++)
      p += x[i * f + k] * w[k];
    double r = p - y[i];
    if (keep)
      m->residual[i] = r;
    loss += r * r;
    mae += fabs(r);
  }
  out->has_loss = true;
  out->loss = loss / (double)n;
  lk_result_metric(out, "mae", mae / (double)n);
  return 0;
}

static int training_step(void *self, const lk_batch *b, lk_step_result *out) {
  return forward(self, b, out, true);
}

static int validation_step(void *self, const lk_batch *b, lk_step_result *out) {
  return forward(self, b, out, false);
}

static int backward(void *self, const lk_batch *b, double scale) {
  linreg *m = self;
  size_t n = b->size, f = m->weight->numel;
  const double *x = b->x.data;
  double *gw = m->weight->grad, *gb = m->bias->grad;
  for (size_t i = 0; i < n; i++) {
    double d = scale * 2.0 * m->residual[i] / (double)n;
    for (size_t k = 0; k < f; k++)
      gw[k] += d * x[i * f + k];
    gb[0] += d;
  }
  return 0;
}

static const lk_option options[] = {
    {"features", LK_OPT_INT, "3", "inputs per sample", NULL},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_step_ops step_ops = {.training_step = training_step,
                                     .validation_step = validation_step};
static const lk_backward_ops backward_ops = {.backward = backward};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "linreg",
    .version = "1.0",
    .summary = "test model: linear regression with mean squared error",
    .options = options,
    .create = create,
    .destroy = destroy,
    .step = &step_ops,
    .backward = &backward_ops,
};

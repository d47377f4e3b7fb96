/* linear: linear regression, y = x weight^T + bias, with mean squared error
 * (torch's MSELoss: the mean over every output of every sample). x is
 * [B, inputs] and y [B] (outputs = 1) or [B, outputs]; f32 is the batch
 * convention, f64 batches are accepted too and computed in f32. The problem
 * is convex: the parameters start at zero. */
#include "bundled.h"
#include "model_dense.h"

/* buf[XF], [cap, inputs]: an f64 batch's x in f32; buf[R], [cap, outputs]:
 * prediction - y, kept for backward. */
typedef model_single linear;
enum { XF, R };

static int create(lk_host *host, const lk_options *o, void **self) {
  return model_single_new(host, (size_t)lk_opt_int(o, "inputs"),
                          (size_t)lk_opt_int(o, "outputs"), false, self);
}

static int check_x(linear *m, const lk_batch *b) {
  const lk_tensor *x = &b->x;
  size_t n = b->size;
  char got[96];
  bool real_x = x->dtype == LK_F32 || x->dtype == LK_F64;
  if (n == 0 || !x->data || !real_x || x->ndim != 2 || x->shape[0] != n ||
      x->shape[1] != m->inputs)
    return n == 0 || !x->data
               ? lk_fail(m->host, LK_EINVAL,
                         "needs batches: x f32 [B, %zu] (is [plugins] data "
                         "set?)",
                         m->inputs)
               : lk_fail(m->host, LK_EINVAL,
                         "x: expected f32 [%zu, %zu], got %s", n, m->inputs,
                         model_shape(x, got, sizeof got));
  return 0;
}

static int check(linear *m, const lk_batch *b) {
  const lk_tensor *y = &b->y;
  size_t n = b->size;
  char got[96];
  int rc = check_x(m, b);
  if (rc != 0)
    return rc;
  bool real_y = y->dtype == LK_F32 || y->dtype == LK_F64;
  bool shape_y = m->outputs == 1
                     ? y->ndim == 1 || (y->ndim == 2 && y->shape[1] == 1)
                     : y->ndim == 2 && y->shape[1] == m->outputs;
  if (!y->data || !real_y || !shape_y || y->shape[0] != n)
    return m->outputs == 1
               ? lk_fail(m->host, LK_EINVAL,
                         "y: expected f32 [%zu] targets, got %s", n,
                         model_shape(y, got, sizeof got))
               : lk_fail(m->host, LK_EINVAL,
                         "y: expected f32 [%zu, %zu] targets, got %s", n,
                         m->outputs, model_shape(y, got, sizeof got));
  return 0;
}

/* x as f32: the batch's own, or converted into buf[XF]. */
static const float *x_f32(linear *m, const lk_batch *b) {
  if (b->x.dtype == LK_F32)
    return b->x.data;
  const double *x = b->x.data;
  for (size_t i = 0; i < b->size * m->inputs; i++)
    m->buf[XF][i] = (float)x[i];
  return m->buf[XF];
}

/* buf[R] = the predictions for batch B, which has been checked. */
static void predict(linear *m, const lk_batch *b) {
  size_t n = b->size, o = m->outputs;
  model_sgemm(false, true, n, o, m->inputs, 1, x_f32(m, b), m->inputs,
              m->w->data, m->inputs, 0, m->buf[R], o);
  model_bias_act(m->buf[R], m->b->data, n, o, MODEL_NONE);
}

static int forward(linear *m, const lk_batch *b, lk_step_result *out) {
  size_t n = b->size, o = m->outputs;
  int rc;
  m->ready = 0;
  if ((rc = check(m, b)) != 0 ||
      (rc = model_single_reserve(m, n, m->inputs, m->outputs)) != 0)
    return rc;
  predict(m, b);
  float *r = m->buf[R];
  double loss = 0;
  for (size_t i = 0; i < n * o; i++) {
    double y = b->y.dtype == LK_F32 ? ((const float *)b->y.data)[i]
                                    : ((const double *)b->y.data)[i];
    r[i] = (float)(r[i] - y);
    loss += (double)r[i] * r[i];
  }
  out->has_loss = true;
  out->loss = loss / (double)(n * o);
  return 0;
}

/* The predictions, f32 [B, outputs] (y is not read). */
static int predict_step(void *self, const lk_batch *b, lk_tensor *out) {
  linear *m = self;
  int rc;
  m->ready = 0;
  if ((rc = check_x(m, b)) != 0 ||
      (rc = model_single_reserve(m, b->size, m->inputs, m->outputs)) != 0)
    return rc;
  predict(m, b);
  *out = model_output("y", m->buf[R], b->size, m->outputs);
  return 0;
}

static int training_step(void *self, const lk_batch *b, lk_step_result *out) {
  linear *m = self;
  int rc = forward(m, b, out);
  if (rc == 0)
    m->ready = b->size;
  return rc;
}

/* The same forward: what it leaves behind is simply not marked ready. */
static int validation_step(void *self, const lk_batch *b, lk_step_result *out) {
  return forward(self, b, out);
}

static int backward(void *self, const lk_batch *b, double scale) {
  linear *m = self;
  size_t n = b->size;
  int rc = model_check_ready(m->host, m->ready, n);
  if (rc != 0)
    return rc;
  const float *x = b->x.dtype == LK_F32 ? b->x.data : m->buf[XF];
  model_dense_grad(m->buf[R], x, n, m->inputs, m->outputs,
                   (float)(scale * 2 / (double)(n * m->outputs)), m->w->grad,
                   m->b->grad);
  return 0;
}

static const lk_option options[] = {
    {"inputs", LK_OPT_INT, NULL, "features per sample (required)", "[1, inf)"},
    {"outputs", LK_OPT_INT, "1", "targets per sample", "[1, inf)"},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_step_ops step_ops = {.training_step = training_step,
                                     .validation_step = validation_step,
                                     .predict_step = predict_step};
static const lk_backward_ops backward_ops = {.backward = backward};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_PLUGIN(
    "linear", "linear regression, mean squared error", model_single_destroy,
    NULL, .step = &step_ops, .backward = &backward_ops);

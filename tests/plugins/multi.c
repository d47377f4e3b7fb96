/* multi: a test model with four parameter tensors of two shapes, for
 * parameter groups and several optimizers, whose loss and gradient
 * tests/torch/matrix_reference.py computes with the same floating-point
 * operations in Python floats (so that only the optimizers are compared
 * with torch's).
 *
 * Parameters (f64): w[4], b[1], u[2][2], v[3]. Batch k (its index) holds
 * samples t = 3k, 3k+1, 3k+2 with x_j = sin(1 + 0.37 (4t + j)), j < 4,
 * and target z = cos(1 + 0.11 t):
 *
 *   h = w.x + b,  q = u.x (u flattened),  p = v.x[0:3]
 *   e = h + p q - z,  loss = f (e_0^2 + e_1^2 + e_2^2) / 3
 *
 * f = 1 + the index of the optimizer whose closure runs (several
 * optimizers, automatic: each has a loss of its own, as a GAN's players).
 *
 * With manual = true the step drives the optimizers itself: zero_grad at
 * the first batch of every window of `accumulate` batches, backward with
 * scale 1/accumulate, and at the window's last batch clipping by norm to
 * `clip` (0: none) and a step of every optimizer, each on its own
 * parameters (lk_optimizer_zero_grad/clip/step per optimizer with
 * per_optimizer = true). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

#define M 3

typedef struct multi {
  lk_host *host;
  lk_tensor *w, *b, *u, *v;
  double x[M][4], e[M], p[M], q[M], f;
  bool manual, per_optimizer;
  int64_t accumulate;
  double clip;
} multi;

static int create(lk_host *host, const lk_options *o, void **self) {
  multi *m = calloc(1, sizeof *m);
  if (!m)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  m->host = host;
  m->manual = lk_opt_bool(o, "manual");
  m->per_optimizer = lk_opt_bool(o, "per_optimizer");
  m->accumulate = lk_opt_int(o, "accumulate");
  m->clip = lk_opt_double(o, "clip");
  size_t four = 4, one = 1, three = 3, two[2] = {2, 2};
  int rc = lk_host_add_param(host, "w", LK_F64, 1, &four, &m->w);
  if (rc == 0)
    rc = lk_host_add_param(host, "b", LK_F64, 1, &one, &m->b);
  if (rc == 0)
    rc = lk_host_add_param(host, "u", LK_F64, 2, two, &m->u);
  if (rc == 0)
    rc = lk_host_add_param(host, "v", LK_F64, 1, &three, &m->v);
  if (rc != 0) {
    free(m);
    return rc;
  }
  static const double w0[4] = {0.1, -0.2, 0.3, 0.05};
  static const double u0[4] = {0.2, -0.1, 0.05, 0.3};
  static const double v0[3] = {0.3, -0.2, 0.1};
  memcpy(m->w->data, w0, sizeof w0);
  ((double *)m->b->data)[0] = 0.05;
  memcpy(m->u->data, u0, sizeof u0);
  memcpy(m->v->data, v0, sizeof v0);
  *self = m;
  return 0;
}

static double forward(multi *m, uint64_t k) {
  const double *w = m->w->data, *b = m->b->data, *u = m->u->data,
               *v = m->v->data;
  int idx = lk_host_optimizer_index(m->host);
  m->f = 1.0 + (idx > 0 ? idx : 0);
  double sum = 0;
  for (int s = 0; s < M; s++) {
    double t = (double)(3 * k + (uint64_t)s);
    double *x = m->x[s];
    for (int j = 0; j < 4; j++)
      x[j] = sin(1.0 + 0.37 * (4.0 * t + j));
    double z = cos(1.0 + 0.11 * t);
    double h = w[0] * x[0];
    double q = u[0] * x[0];
    for (int j = 1; j < 4; j++) {
      h = h + w[j] * x[j];
      q = q + u[j] * x[j];
    }
    h = h + b[0];
    double p = v[0] * x[0];
    for (int j = 1; j < 3; j++)
      p = p + v[j] * x[j];
    m->e[s] = (h + p * q) - z;
    m->p[s] = p;
    m->q[s] = q;
    sum = sum + m->e[s] * m->e[s];
  }
  return m->f * (sum / M);
}

static int backward(void *self, const lk_batch *batch, double scale) {
  multi *m = self;
  (void)batch;
  double *wg = m->w->grad, *bg = m->b->grad, *ug = m->u->grad, *vg = m->v->grad;
  for (int s = 0; s < M; s++) {
    const double *x = m->x[s];
    double ge = m->f * ((2.0 * m->e[s]) / M);
    for (int j = 0; j < 4; j++)
      wg[j] = wg[j] + scale * (ge * x[j]);
    bg[0] = bg[0] + scale * ge;
    for (int j = 0; j < 4; j++)
      ug[j] = ug[j] + scale * ((ge * m->p[s]) * x[j]);
    for (int j = 0; j < 3; j++)
      vg[j] = vg[j] + scale * ((ge * m->q[s]) * x[j]);
  }
  return 0;
}

/* Manual optimization: the window's zero_grad, backward, clip and step,
 * for one optimizer or each of several. */
static int drive(multi *m, const lk_batch *batch, double loss) {
  int64_t pos = (int64_t)(batch->index % (uint64_t)m->accumulate);
  size_t n = lk_host_optimizer_count(m->host);
  int rc = 0;
  if (pos == 0)
    rc = m->per_optimizer ? 0 : lk_host_zero_grad(m->host);
  for (size_t i = 0; m->per_optimizer && pos == 0 && i < n && rc == 0; i++)
    rc = lk_optimizer_zero_grad(lk_host_optimizer(m->host, i));
  if (rc == 0)
    rc = lk_host_backward(m->host, batch, loss, 1.0 / (double)m->accumulate);
  if (rc != 0 || pos + 1 < m->accumulate)
    return rc;
  if (!m->per_optimizer) {
    if (m->clip > 0)
      rc = lk_host_clip_gradients(m->host, m->clip, "norm");
    return rc ? rc : lk_host_optimizer_step(m->host, NULL);
  }
  for (size_t i = 0; i < n && rc == 0; i++) {
    lk_optimizer *opt = lk_host_optimizer(m->host, i);
    if (m->clip > 0)
      rc = lk_optimizer_clip_gradients(opt, m->clip, "norm");
    if (rc == 0)
      rc = lk_optimizer_step(opt, NULL, 0, NULL);
  }
  return rc;
}

static int training_step(void *self, const lk_batch *batch,
                         lk_step_result *out) {
  multi *m = self;
  double loss = forward(m, batch->index);
  out->has_loss = true;
  out->loss = loss;
  return m->manual ? drive(m, batch, loss) : 0;
}

static int validation_step(void *self, const lk_batch *batch,
                           lk_step_result *out) {
  multi *m = self;
  out->has_loss = true;
  out->loss = forward(m, batch->index);
  return 0;
}

static const lk_option options[] = {
    {"manual", LK_OPT_BOOL, "false",
     "drive the optimizers from training_step (set with "
     "manual_optimization = true)",
     NULL},
    {"per_optimizer", LK_OPT_BOOL, "false",
     "manual: zero, clip and step each of the run's optimizers on its own",
     NULL},
    {"accumulate", LK_OPT_INT, "1", "manual: batches a step accumulates",
     "[1, 1000]"},
    {"clip", LK_OPT_DOUBLE, "0", "manual: clip by norm to this (0: none)",
     "[0, inf)"},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_step_ops step_ops = {.training_step = training_step,
                                     .validation_step = validation_step};
static const lk_backward_ops backward_ops = {.backward = backward};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "multi",
    .version = "1.0",
    .summary =
        "test model with four parameter tensors for groups and "
        "several optimizers, mirrored by tests/torch/matrix_reference.py",
    .options = options,
    .create = create,
    .destroy = free,
    .step = &step_ops,
    .backward = &backward_ops,
};

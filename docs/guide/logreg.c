/* logreg: binary logistic regression, a loopkit model plugin.
 *
 * p(y = 1 | x) = sigmoid(w . x + b). The loss is the batch's mean binary
 * cross-entropy plus l2/2 * |w|^2, and the step reports accuracy as a
 * metric. One plugin plays two roles: step (the forward pass) and backward
 * (the analytic gradient of that loss). Batches come from a data plugin
 * such as csv: x is f32 [B, inputs] and y is i32 [B], labels 0 or 1.
 *
 * Build: make (see the Makefile). Run: loopkit train logreg.ini */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <loopkit/loopkit.h>

typedef struct logreg {
  lk_host *host; /* for lk_fail and lk_log; valid until destroy */
  size_t inputs;
  double l2;
  lk_tensor *w, *b; /* parameters: the host owns them */
  double *r;        /* sigmoid(z_i) - y_i per sample: what backward needs */
  size_t cap;       /* samples r can hold */
  size_t ready;     /* size of the batch backward may use; 0: none */
} logreg;

static void destroy(void *self) {
  logreg *m = self;
  free(m->r);
  free(m);
}

static int create(lk_host *host, const lk_options *opts, void **self) {
  /* The host checked each value against the range the option table
   * declares (and that a double is finite) before calling us. */
  int64_t inputs = lk_opt_int(opts, "inputs");
  double l2 = lk_opt_double(opts, "l2");
  double init_std = lk_opt_double(opts, "init_std");

  logreg *m = calloc(1, sizeof *m);
  if (!m)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  m->host = host;
  m->inputs = (size_t)inputs;
  m->l2 = l2;
  size_t one = 1;
  int rc = lk_host_add_param(host, "weight", LK_F64, 1, &m->inputs, &m->w);
  if (rc == 0)
    rc = lk_host_add_param(host, "bias", LK_F64, 1, &one, &m->b);
  if (rc != 0) { /* lk_host_add_param said why */
    free(m);
    return rc;
  }
  /* Parameters start at zero. A random start draws from the run's
   * generator, never rand(): the same seed then gives the same run. A
   * resumed run overwrites these values with the checkpoint's. */
  if (init_std > 0) {
    lk_rng *rng = lk_host_rng(host);
    double *w = m->w->data;
    for (size_t j = 0; j < m->inputs; j++)
      w[j] = init_std * lk_rng_normal(rng);
  }
  lk_log(host, LK_LOG_DEBUG, "%zu inputs, l2 = %g", m->inputs, l2);
  *self = m;
  return 0;
}

/* "f32 [32, 2]": a tensor's type and shape, for messages. */
static const char *describe(const lk_tensor *t, char *buf, size_t len) {
  const char *type = lk_dtype_name(t->dtype);
  size_t used = (size_t)snprintf(buf, len, "%s [", type ? type : "?");
  for (size_t i = 0; i < t->ndim && i < LK_MAX_DIMS && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, "%s%zu", i ? ", " : "",
                             t->shape[i]);
  if (used < len)
    snprintf(buf + used, len - used, "]");
  return buf;
}

/* A batch we can use, or an error that says what we got instead. */
static int check_batch(logreg *m, const lk_batch *b) {
  const lk_tensor *x = &b->x, *y = &b->y;
  char got[96];
  if (b->size == 0 || !x->data || !y->data)
    return lk_fail(m->host, LK_EINVAL,
                   "needs batches of samples: set [plugins] data (csv, for "
                   "instance)");
  if (x->dtype != LK_F32 || x->ndim != 2 || x->shape[0] != b->size ||
      x->shape[1] != m->inputs)
    return lk_fail(m->host, LK_EINVAL,
                   "x: expected f32 [%zu, %zu] (option inputs = %zu), got %s",
                   b->size, m->inputs, m->inputs, describe(x, got, sizeof got));
  if (y->dtype != LK_I32 || y->ndim != 1 || y->shape[0] != b->size)
    return lk_fail(m->host, LK_EINVAL,
                   "y: expected i32 [%zu] class labels (csv: labels = int), "
                   "got %s",
                   b->size, describe(y, got, sizeof got));
  return 0;
}

static double sigmoid(double z) {
  /* Either form alone overflows exp() for large |z| of one sign. */
  if (z >= 0)
    return 1 / (1 + exp(-z));
  double e = exp(z);
  return e / (1 + e);
}

/* The loss and accuracy of batch B; leaves the residuals in m->r. */
static int forward(logreg *m, const lk_batch *b, lk_step_result *out) {
  int rc = check_batch(m, b);
  if (rc != 0)
    return rc;
  if (b->size > m->cap) { /* grow once to the largest batch, never shrink */
    double *r = realloc(m->r, b->size * sizeof *r);
    if (!r)
      return lk_fail(m->host, LK_ENOMEM, "out of memory for a batch of %zu",
                     b->size);
    m->r = r;
    m->cap = b->size;
  }
  const float *x = b->x.data;
  const int32_t *y = b->y.data;
  const double *w = m->w->data, bias = *(const double *)m->b->data;
  double loss = 0, correct = 0, norm2 = 0;
  for (size_t i = 0; i < b->size; i++) {
    if (y[i] != 0 && y[i] != 1)
      return lk_fail(m->host, LK_EINVAL,
                     "sample %zu of batch %zu has label %d: expected 0 or 1", i,
                     b->index, (int)y[i]);
    double z = bias;
    for (size_t j = 0; j < m->inputs; j++)
      z += w[j] * x[i * m->inputs + j];
    /* -log p(y | x) = log(1 + e^z) - y z, in a form where exp() cannot
     * overflow. */
    loss += fmax(z, 0) - y[i] * z + log1p(exp(-fabs(z)));
    m->r[i] = sigmoid(z) - y[i];
    correct += (z > 0) == (y[i] == 1);
  }
  for (size_t j = 0; j < m->inputs; j++)
    norm2 += w[j] * w[j];
  out->has_loss = true;
  out->loss = loss / (double)b->size + 0.5 * m->l2 * norm2;
  /* The name is a string literal: the host keeps the pointer. */
  return lk_result_metric(out, "accuracy", correct / (double)b->size);
}

static int training_step(void *self, const lk_batch *b, lk_step_result *out) {
  logreg *m = self;
  m->ready = 0;
  int rc = forward(m, b, out);
  if (rc == 0)
    m->ready = b->size;
  return rc;
}

/* The same forward pass. It overwrites the residuals, so a backward after
 * it would be wrong: it clears ready, and such a backward fails. */
static int validation_step(void *self, const lk_batch *b, lk_step_result *out) {
  logreg *m = self;
  m->ready = 0;
  return forward(m, b, out);
}

/* Adds scale * dloss/dparam into each gradient. Adds, never assigns: the
 * zero_grad plugin clears the gradients, and under gradient accumulation
 * several batches' gradients must sum. */
static int backward(void *self, const lk_batch *b, double scale) {
  logreg *m = self;
  if (m->ready == 0 || m->ready != b->size)
    return lk_fail(m->host, LK_ESTATE,
                   "backward without a training_step on this batch");
  const float *x = b->x.data;
  const double *w = m->w->data;
  double *gw = m->w->grad, *gb = m->b->grad;
  double k = scale / (double)b->size, sum_r = 0;
  for (size_t j = 0; j < m->inputs; j++)
    gw[j] += scale * m->l2 * w[j];
  for (size_t i = 0; i < b->size; i++) {
    sum_r += m->r[i];
    for (size_t j = 0; j < m->inputs; j++)
      gw[j] += k * m->r[i] * x[i * m->inputs + j];
  }
  gb[0] += k * sum_r;
  return 0;
}

static const lk_option options[] = {
    /* name, type, default (NULL: required), help, range */
    {"inputs", LK_OPT_INT, NULL, "features per sample (required)", "[1, inf)"},
    {"l2", LK_OPT_DOUBLE, "0", "L2 penalty l2/2 |w|^2 in the loss", "[0, inf)"},
    {"init_std", LK_OPT_DOUBLE, "0",
     "standard deviation of the initial weights (0: start at zero)",
     "[0, inf)"},
    {NULL, 0, NULL, NULL, NULL}};

/* test_step is NULL: the test split then uses validation_step. */
static const lk_step_ops step_ops = {.training_step = training_step,
                                     .validation_step = validation_step};
static const lk_backward_ops backward_ops = {.backward = backward};

/* The one exported symbol. Plain data, checked before any code above runs. */
LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "logreg",
    .version = "1.0",
    .summary = "binary logistic regression, cross-entropy and accuracy",
    .options = options,
    .create = create,
    .destroy = destroy,
    .step = &step_ops,
    .backward = &backward_ops,
};

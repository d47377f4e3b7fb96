/* @NAME@: linear regression, y = w . x + b, with mean squared error: a
 * model, its forward pass (step) and its gradient (backward) in one plugin,
 * as the bundled linear is. A loopkit plugin of kinds step and backward,
 * written by `loopkit new --kind model`.
 *
 * Try it:   make && loopkit train @NAME@.ini
 * @NAME@.ini feeds it features.csv through the bundled csv data plugin:
 * samples of y = 0.5 x^2 - x + 2 with two features, x and x^2, which a
 * linear model fits exactly with w = (-1, 0.5) and b = 2, and trains it
 * with the bundled sgd. The run directory holds metrics.csv (loss and mae
 * per step, val_loss and val_mae per epoch) and checkpoints; `loopkit dump
 * RUN_DIR/checkpoints/last.ckpt` prints w and b.
 * `loopkit gradcheck @NAME@.ini` holds backward against central
 * differences of training_step's loss: run it after every change to
 * either.
 *
 * Its size comes from the data: the data plugin, created before the
 * model, says what a sample looks like (lk_host_data_shape), and option
 * inputs = 0 takes that. [plugins] step names this plugin and backward
 * defaults to the step's: the two roles share one instance, so
 * training_step leaves in it what backward needs, the residuals of its
 * batch. */
#include "preamble.h"

/* Shapes, named once: B samples in a batch, F features per sample.
 *   x [B, F]   y [B]   weight [F]   bias [1]   residual [B] */
typedef struct model {
  lk_host *host;     /* to fail and log; valid until destroy */
  size_t inputs;     /* F */
  lk_tensor *weight; /* [F] a parameter, owned by the host */
  lk_tensor *bias;   /* [1] a parameter */
  double *residual;  /* [B] prediction - y of the last training step */
  size_t cap;        /* samples residual has room for */
  size_t ready;      /* B of the training step backward may use (0: none) */
} model;

static void destroy(void *self) {
  model *m = self;
  free(m->residual);
  free(m);
}

/* The number of features: option INPUTS, or what the data says (0: it
 * says nothing). A mismatch is a config error, found here, before
 * anything is trained, rather than at the first batch. */
static int data_inputs(lk_host *host, size_t inputs, size_t *out) {
  lk_sample_shape s;
  *out = inputs;
  int rc = lk_host_data_shape(host, &s);
  if (rc == LK_ENOTFOUND)
    return 0;  /* no data plugin, or it does not say: check_batch will */
  if (rc != 0) /* an impossible shape: the host's message names it */
    return lk_fail(host, LK_ECONFIG, "the data's sample shape: %s",
                   lk_last_error());
  size_t features, targets; /* products that cannot wrap */
  if (!lk_shape_numel(s.x_shape, s.x_ndim, &features) ||
      !lk_shape_numel(s.y_shape, s.y_ndim, &targets))
    return lk_fail(host, LK_ECONFIG, "the data's samples are too large");
  if (s.n_classes > 0 || s.y_dtype == 0 || targets != 1)
    return lk_fail(host, LK_ECONFIG,
                   "needs one real target per sample, and the data's "
                   "samples have %s (is [csv] labels = float?)",
                   s.n_classes > 0  ? "class labels"
                   : s.y_dtype == 0 ? "none"
                                    : "several");
  if (inputs != 0 && inputs != features)
    return lk_fail(host, LK_ECONFIG,
                   "option inputs = %zu, but the data's samples have %zu "
                   "features (0: as the data says)",
                   inputs, features);
  *out = features;
  return 0;
}

/* create: runs once, before training (and before a checkpoint is loaded
 * when the run resumes: the host then overwrites the parameters). */
static int create(lk_host *host, const lk_options *opts, void **self) {
  size_t inputs;
  int rc = data_inputs(host, (size_t)lk_opt_int(opts, "inputs"), &inputs);
  if (rc != 0)
    return rc;
  if (inputs == 0)
    return lk_fail(host, LK_ECONFIG,
                   "option inputs = 0 takes the number of features from the "
                   "data plugin, and there is none that says: set inputs");
  model *m = calloc(1, sizeof *m);
  if (!m)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  m->host = host;
  m->inputs = inputs;
  /* The names are what loopkit dump and checkpoints show. The host
   * zero-fills parameters: a fine start for a convex problem (a network
   * would draw its weights from lk_host_rng here). */
  size_t one = 1;
  rc = lk_host_add_param(host, "weight", LK_F64, 1, &inputs, &m->weight);
  if (rc == 0)
    rc = lk_host_add_param(host, "bias", LK_F64, 1, &one, &m->bias);
  if (rc != 0) { /* the host has said why */
    free(m);
    return rc;
  }
  lk_log(host, LK_LOG_INFO, "linear regression on %zu features", inputs);
  *self = m;
  return 0;
}

/* Element I of a batch tensor, which may be f32 or f64. */
static double at(const lk_tensor *t, size_t i) {
  return t->dtype == LK_F32 ? ((const float *)t->data)[i]
                            : ((const double *)t->data)[i];
}

/* A batch belongs to the data plugin and is valid during this call only:
 * keep nothing that points into it. */
static int check_batch(model *m, const lk_batch *b) {
  const lk_tensor *x = &b->x, *y = &b->y;
  size_t n = b->size;
  if (n == 0 || !x->data || !y->data)
    return lk_fail(m->host, LK_EINVAL,
                   "needs batches of samples: set [plugins] data (without a "
                   "data plugin the loop passes an empty batch)");
  bool real = (x->dtype == LK_F32 || x->dtype == LK_F64) &&
              (y->dtype == LK_F32 || y->dtype == LK_F64);
  if (!real || x->ndim < 1 || x->shape[0] != n || x->numel != n * m->inputs ||
      y->numel != n)
    return lk_fail(m->host, LK_EINVAL,
                   "expected x [%zu, %zu] and y [%zu], f32 or f64", n,
                   m->inputs, n);
  if (n > m->cap) { /* the buffer grows once and is reused */
    double *r = realloc(m->residual, n * sizeof *r);
    if (!r)
      return lk_fail(m->host, LK_ENOMEM, "out of memory for %zu samples", n);
    m->residual = r;
    m->cap = n;
  }
  return 0;
}

/* forward: residual_i = b + sum_f w_f x_if - y_i,
 *          loss = mean_i residual_i^2 (and mae = mean_i |residual_i|). */
static int forward(model *m, const lk_batch *b, lk_step_result *out) {
  int rc = check_batch(m, b);
  if (rc != 0)
    return rc;
  const double *w = m->weight->data, *bias = m->bias->data;
  size_t n = b->size, f = m->inputs;
  double sse = 0, sae = 0;
  for (size_t i = 0; i < n; i++) {
    double pred = bias[0];
    for (size_t j = 0; j < f; j++)
      pred += w[j] * at(&b->x, i * f + j);
    double r = pred - at(&b->y, i);
    m->residual[i] = r;
    sse += r * r;
    sae += fabs(r);
  }
  out->has_loss = true;
  out->loss = sse / (double)n;
  /* Metric names must outlive the run: string literals. Training metrics
   * become metrics.csv columns as they are; validation's get "val_". */
  return lk_result_metric(out, "mae", sae / (double)n);
}

/* backward: d loss/d w_f = 2/B sum_i residual_i x_if,
 *           d loss/d b   = 2/B sum_i residual_i,
 * ADDED, times SCALE, into the gradients (the host zeroes them before each
 * accumulation window, with the zero_grad plugin, and passes scale = 1/N
 * when N batches accumulate). It runs right after training_step on the
 * same batch: the residuals are still there. */
static int backward(void *self, const lk_batch *batch, double scale) {
  model *m = self;
  if (m->ready == 0 || m->ready != batch->size)
    return lk_fail(m->host, LK_ESTATE,
                   "backward without a training step on this batch");
  size_t n = batch->size, f = m->inputs;
  double k = scale * 2 / (double)n;
  double *gw = m->weight->grad, *gb = m->bias->grad;
  for (size_t i = 0; i < n; i++) {
    double r = k * m->residual[i];
    for (size_t j = 0; j < f; j++)
      gw[j] += r * at(&batch->x, i * f + j);
    gb[0] += r;
  }
  return 0;
}

/* training_step: the forward pass on a training batch. The loop calls it
 * inside the closure the optimizer runs, then zero_grad and backward. */
static int training_step(void *self, const lk_batch *batch,
                         lk_step_result *out) {
  model *m = self;
  m->ready = 0;
  int rc = forward(m, batch, out);
  if (rc == 0)
    m->ready = batch->size; /* what backward may rely on */
  return rc;
}

/* validation_step: the same on a validation batch, after each epoch (or
 * every [loop] val_every_n_epochs); the loop averages the results over the
 * split, weighted by batch size, and logs val_loss and val_mae. */
static int validation_step(void *self, const lk_batch *batch,
                           lk_step_result *out) {
  model *m = self;
  m->ready = 0; /* the residuals are no longer the training step's */
  return forward(m, batch, out);
}

/* test_step: the test split, once after training (test_loss, ...). It may
 * be NULL: the loop then uses validation_step. */
static int test_step(void *self, const lk_batch *batch, lk_step_result *out) {
  return validation_step(self, batch, out);
}

/* Options: name, type, default as written in a config (NULL: required),
 * help (loopkit inspect shows it), and the range of a number or the
 * choices of an LK_OPT_ENUM (NULL: any). */
static const lk_option options[] = {
    {"inputs", LK_OPT_INT, "0",
     "features per sample (0: as the data plugin says)", "[0, 1000000]"},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_step_ops step_ops = {.training_step = training_step,
                                     .validation_step = validation_step,
                                     .test_step = test_step};
static const lk_backward_ops backward_ops = {.backward = backward};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION, /* the ABI this file was compiled for */
    .size = sizeof(lk_descriptor),
    .name = "@NAME@", /* its [section] in a config */
    .version = "0.1",
    .summary = "linear regression, mean squared error (step and backward)",
    .options = options,
    .create = create,
    .destroy = destroy,
    .step = &step_ops,
    .backward = &backward_ops,
};

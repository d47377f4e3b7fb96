/* @NAME@: the loss of a parabola y = a x^2 + b x + c on samples (x, y),
 * as a step alone: it computes the loss (and a metric) of a batch, and a
 * backward plugin computes the gradient. A loopkit plugin of kind step,
 * written by `loopkit new --kind step`.
 *
 * Try it:   make && loopkit train @NAME@.ini
 * @NAME@.ini feeds it data.csv, points of y = 0.5 x^2 - x + 2, through the
 * bundled csv data plugin, and trains a, b and c with the bundled sgd. Its
 * backward is the bundled numeric: central differences of this step's
 * loss, two forward passes per parameter, which is fine for three of them
 * (and what `loopkit new NAME --kind model` replaces with a gradient of its
 * own). The best fit is known: a = 0.5, b = -1, c = 2. The run directory
 * holds metrics.csv (loss and mae per step, val_loss and val_mae per epoch)
 * and checkpoints; `loopkit dump RUN_DIR/checkpoints/last.ckpt` prints a,
 * b, c.
 *
 * The loop calls training_step inside the closure the optimizer runs, then
 * zero_grad and backward. A step must give the same loss for the same
 * parameters and batch: numeric (and loopkit gradcheck) evaluate it again
 * with the parameters nudged, through lk_host_evaluate. */
#include "preamble.h"

/* The instance: what create allocates and every entry gets as self. */
typedef struct parabola {
  lk_host *host;   /* to fail and log; valid until destroy */
  lk_tensor *coef; /* [3]: a, b, c; a parameter, owned by the host */
} parabola;

static void destroy(void *self) {
  free(self);
}

/* create: runs once, before training (and before a checkpoint is loaded
 * when the run resumes: the host then overwrites the parameters). */
static int create(lk_host *host, const lk_options *opts, void **self) {
  size_t n = 0;
  const double *init = lk_opt_doubles(opts, "init", &n);
  if (n != 3)
    return lk_fail(host, LK_ECONFIG,
                   "option init has %zu values: give a, b and c, e.g. "
                   "init = 0,0,0",
                   n);
  parabola *m = calloc(1, sizeof *m);
  if (!m)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  m->host = host;
  size_t shape[1] = {3};
  /* The parameter's name is what loopkit dump and checkpoints show; the
   * host gives it a gradient of the same shape, for the backward. */
  int rc = lk_host_add_param(host, "coef", LK_F64, 1, shape, &m->coef);
  if (rc != 0) { /* the host has said why */
    free(m);
    return rc;
  }
  double *c = m->coef->data;
  for (size_t i = 0; i < 3; i++)
    c[i] = init[i];
  *self = m;
  return 0;
}

/* Element I of a batch tensor, which may be f32 or f64. */
static double at(const lk_tensor *t, size_t i) {
  return t->dtype == LK_F32 ? ((const float *)t->data)[i]
                            : ((const double *)t->data)[i];
}

/* A batch holds SIZE samples: x is [size, features] (we use feature 0) or
 * [size], y is [size] or [size, 1]. It belongs to the data plugin and is
 * valid during this call only: keep nothing that points into it. */
static int check_batch(parabola *m, const lk_batch *b) {
  const lk_tensor *x = &b->x, *y = &b->y;
  if (b->size == 0 || !x->data || !y->data)
    return lk_fail(m->host, LK_EINVAL,
                   "needs batches of samples: set [plugins] data (without a "
                   "data plugin the loop passes an empty batch)");
  bool real = (x->dtype == LK_F32 || x->dtype == LK_F64) &&
              (y->dtype == LK_F32 || y->dtype == LK_F64);
  if (!real || x->ndim < 1 || x->shape[0] != b->size || y->numel != b->size)
    return lk_fail(m->host, LK_EINVAL,
                   "expected x [%zu, ...] and y [%zu], f32 or f64 (is "
                   "[csv] labels = float?)",
                   b->size, b->size);
  return 0;
}

/* The forward pass: the loss (mean squared error) and a metric into OUT. */
static int forward(parabola *m, const lk_batch *b, lk_step_result *out) {
  int rc = check_batch(m, b);
  if (rc != 0)
    return rc;
  const double *c = m->coef->data;
  size_t n = b->size, stride = b->x.numel / n; /* features per sample */
  double sse = 0, sae = 0;
  for (size_t i = 0; i < n; i++) {
    double x = at(&b->x, i * stride);
    double r = c[0] * x * x + c[1] * x + c[2] - at(&b->y, i);
    sse += r * r;
    sae += fabs(r);
  }
  out->has_loss = true;
  out->loss = sse / (double)n;
  /* Metric names must outlive the run: string literals. Training metrics
   * become metrics.csv columns as they are; validation's get "val_". */
  return lk_result_metric(out, "mae", sae / (double)n);
}

/* training_step: the forward pass on a training batch. */
static int training_step(void *self, const lk_batch *batch,
                         lk_step_result *out) {
  return forward(self, batch, out);
}

/* validation_step: the same on a validation batch, after each epoch (or
 * every [loop] val_every_n_epochs); the loop averages the results over the
 * split, weighted by batch size, and logs val_loss and val_mae. test_step,
 * for the test split once after training, is left NULL: the loop then uses
 * this one (test_loss, test_mae). */
static int validation_step(void *self, const lk_batch *batch,
                           lk_step_result *out) {
  return forward(self, batch, out);
}

/* Options: name, type, default as written in a config (NULL: required),
 * help (loopkit inspect shows it), and the range of a number or the
 * choices of an LK_OPT_ENUM (NULL: any; a double is always finite). */
static const lk_option options[] = {
    {"init", LK_OPT_DOUBLES, "0,0,0", "starting values of a, b and c", NULL},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_step_ops step_ops = {.training_step = training_step,
                                     .validation_step = validation_step};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION, /* the ABI this file was compiled for */
    .size = sizeof(lk_descriptor),
    .name = "@NAME@", /* its [section] in a config */
    .version = "0.1",
    .summary = "the squared error of a parabola y = a x^2 + b x + c",
    .options = options,
    .create = create,
    .destroy = destroy,
    .step = &step_ops,
};

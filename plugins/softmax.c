/* softmax: multinomial logistic regression, logits = x weight^T + bias with
 * softmax cross-entropy against i32 labels; metrics loss and acc. The
 * problem is convex, so the parameters start at zero (the run is then the
 * same whatever the seed). */
#include "model_common.h"

typedef struct softmax {
  lk_host *host;
  size_t inputs, classes;
  lk_tensor *w, *b;
  float *z, *d; /* [cap, classes]: logits, and dL/dlogits for backward */
  size_t cap;   /* batch size the buffers hold; they never shrink */
  size_t ready; /* batch size of the training step backward may use, or 0 */
} softmax;

static void destroy(void *self) {
  softmax *m = self;
  free(m->z);
  free(m->d);
  free(m);
}

static int create(lk_host *host, const lk_options *o, void **self) {
  model_blas_threads();
  size_t in = (size_t)lk_opt_int(o, "inputs");
  size_t c = (size_t)lk_opt_int(o, "classes");
  int rc = model_check_data(host, "inputs", in, c, 0);
  if (rc != 0)
    return rc;
  softmax *m = calloc(1, sizeof *m);
  if (!m)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  m->host = host;
  m->inputs = in;
  m->classes = c;
  if ((rc = model_add_dense(host, NULL, in, c, &m->w, &m->b)) != 0) {
    free(m);
    return rc;
  }
  *self = m;
  return 0;
}

static int forward(softmax *m, const lk_batch *b, lk_step_result *out,
                   bool keep) {
  size_t n = b->size;
  int rc;
  m->ready = 0;
  if ((rc = model_check_x(m->host, b, m->inputs)) != 0 ||
      (rc = model_check_labels(m->host, b, m->classes)) != 0)
    return rc;
  float **buf[] = {&m->z, &m->d};
  size_t width[] = {m->classes, m->classes};
  if ((rc = model_reserve(m->host, n, &m->cap, buf, width, 2)) != 0)
    return rc;
  model_sgemm(false, true, n, m->classes, m->inputs, 1, b->x.data, m->inputs,
              m->w->data, m->inputs, 0, m->z, m->classes);
  model_bias_act(m->z, m->b->data, n, m->classes, MODEL_NONE);
  size_t correct;
  double loss =
      model_xent(m->z, b->y.data, n, m->classes, keep ? m->d : NULL, &correct);
  out->has_loss = true;
  out->loss = loss / (double)n;
  lk_result_metric(out, "acc", (double)correct / (double)n);
  if (keep)
    m->ready = n;
  return 0;
}

static int training_step(void *self, const lk_batch *b, lk_step_result *out) {
  return forward(self, b, out, true);
}

static int validation_step(void *self, const lk_batch *b, lk_step_result *out) {
  return forward(self, b, out, false);
}

static int backward(void *self, const lk_batch *b, double scale) {
  softmax *m = self;
  int rc = model_check_ready(m->host, m->ready, b->size);
  if (rc != 0)
    return rc;
  model_dense_grad(m->d, b->x.data, b->size, m->inputs, m->classes,
                   (float)(scale / (double)b->size), m->w->grad, m->b->grad);
  return 0;
}

static const lk_option options[] = {
    {"inputs", LK_OPT_INT, "784", "features per sample", "[1, inf)"},
    {"classes", LK_OPT_INT, "10", "number of classes", "[2, inf)"},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_step_ops step_ops = {.training_step = training_step,
                                     .validation_step = validation_step};
static const lk_backward_ops backward_ops = {.backward = backward};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "softmax",
    .version = "1.0",
    .summary = "multinomial logistic regression, softmax cross-entropy",
    .options = options,
    .create = create,
    .destroy = destroy,
    .step = &step_ops,
    .backward = &backward_ops,
};

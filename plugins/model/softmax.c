/* softmax: multinomial logistic regression, logits = x weight^T + bias with
 * softmax cross-entropy against i32 labels; metrics loss and acc. The
 * problem is convex, so the parameters start at zero (the run is then the
 * same whatever the seed). */
#include "bundled.h"
#include "model_dense.h"

/* outputs: the classes; buf[Z] and buf[D], [cap, classes]: the logits,
 * and dL/dlogits for backward. */
typedef model_single softmax;
enum { Z, D };

static int create(lk_host *host, const lk_options *o, void **self) {
  int rc = model_single_new(host, (size_t)lk_opt_int(o, "inputs"),
                            (size_t)lk_opt_int(o, "classes"), true, self);
  softmax *m = rc == 0 ? *self : NULL;
  if (m && (rc = model_scores_init(host, o, m->outputs, &m->scores)) != 0)
    model_single_destroy(m);
  return rc;
}

/* buf[Z] = the logits of batch B, x checked. */
static int logits(softmax *m, const lk_batch *b) {
  size_t n = b->size;
  int rc;
  m->ready = 0;
  if ((rc = model_check_x(m->host, b, m->inputs)) != 0 ||
      (rc = model_single_reserve(m, n, m->outputs, m->outputs)) != 0)
    return rc;
  model_sgemm(false, true, n, m->outputs, m->inputs, 1, b->x.data, m->inputs,
              m->w->data, m->inputs, 0, m->buf[Z], m->outputs);
  model_bias_act(m->buf[Z], m->b->data, n, m->outputs, MODEL_NONE);
  return 0;
}

static int forward(softmax *m, const lk_batch *b, lk_step_result *out,
                   bool keep) {
  int rc = model_check_x(m->host, b, m->inputs);
  if (rc == 0)
    rc = model_check_labels(m->host, b, m->outputs);
  if (rc == 0)
    rc = logits(m, b);
  if (rc != 0)
    return rc;
  model_classify(m->buf[Z], b, m->outputs, keep ? m->buf[D] : NULL, out);
  model_scores_batch(&m->scores, m->buf[Z], b, !keep, out);
  if (keep)
    m->ready = b->size;
  return 0;
}

/* The logits, f32 [B, classes]. */
static int predict_step(void *self, const lk_batch *b, lk_tensor *out) {
  softmax *m = self;
  int rc = logits(m, b);
  if (rc == 0)
    *out = model_output("logits", m->buf[Z], b->size, m->outputs);
  return rc;
}

/* The logits as ONNX (loopkit export FILE.onnx): one Gemm. */
static int onnx_graph(void *self, lk_onnx *g) {
  softmax *m = self;
  int rc = model_onnx_io(m->host, g, m->inputs, m->outputs);
  return rc ? rc
            : model_onnx_dense(m->host, g, "input", m->w, m->b, MODEL_NONE,
                               "output", NULL);
}

MODEL_CLASSIFIER_STEPS(softmax, forward, onnx_graph);

static int backward(void *self, const lk_batch *b, double scale) {
  softmax *m = self;
  int rc = model_check_ready(m->host, m->ready, b->size);
  if (rc != 0)
    return rc;
  model_dense_grad(m->buf[D], b->x.data, b->size, m->inputs, m->outputs,
                   (float)(scale / (double)b->size), m->w->grad, m->b->grad);
  return 0;
}

static const lk_option options[] = {
    {"inputs", LK_OPT_INT, "784", "features per sample", "[1, inf)"},
    {"classes", LK_OPT_INT, "10", "number of classes", "[2, inf)"},
    MODEL_SCORE_OPTIONS,
    {NULL, 0, NULL, NULL, NULL}};

static const lk_backward_ops backward_ops = {.backward = backward};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_PLUGIN(
    "softmax", "multinomial logistic regression, softmax cross-entropy",
    model_single_destroy, NULL, .step = &step_ops, .backward = &backward_ops);

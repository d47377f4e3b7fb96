/* mlp: a multilayer perceptron classifier, dense layers with ReLU or tanh
 * between them and softmax cross-entropy on the last one's logits; metrics
 * loss and acc. Parameters layer<i>.weight [out, in] and layer<i>.bias [out]
 * (a torch module whose Linear layers are attributes layer0, layer1, ...
 * has the same state_dict names), initialised as torch.nn.Linear does
 * (U(-1/sqrt(in), 1/sqrt(in)) for both, drawn from the run's generator) or
 * read from a file: a .safetensors file by name (lk_host_load_params), or a
 * raw f32 file laid out as torch stores them.
 *
 * Speed: the activations of a batch size are allocated once (the buffers
 * only grow), every product is one sgemm (or sgemv for a batch of one), and
 * bias and activation are fused into one pass. */

#include "bundled.h"
#include "model_dense.h"

typedef struct layer {
  size_t in, out;
  lk_tensor *w, *b;
  float *a; /* [cap, out]: the activation (logits for the last layer) */
} layer;

typedef struct mlp {
  lk_host *host;
  model_act act;
  size_t n_layers, max_width;
  layer *layers;
  float *block; /* holds every layer's a and the two deltas */
  float *d[2];  /* [cap, max_width]: dL/dz, ping-pong through the layers */
  size_t cap;   /* batch size the buffers hold */
  size_t ready; /* batch size of the training step backward may use, or 0 */
  model_scores scores; /* top-k and F1 */
} mlp;

static void destroy(void *self) {
  mlp *m = self;
  model_scores_free(&m->scores);
  free(m->block);
  free(m->layers);
  free(m);
}

/* Makes the buffers hold a batch of N; they never shrink. */
static int reserve(mlp *m, size_t n) {
  if (n <= m->cap)
    return 0;
  size_t per = 2 * m->max_width;
  for (size_t l = 0; l < m->n_layers; l++)
    per += (m->layers[l].out + 15) / 16 * 16; /* keep each one aligned */
  float *block = model_alloc(n, per);
  if (!block)
    return lk_fail(m->host, LK_ENOMEM, "out of memory for a batch of %zu", n);
  free(m->block);
  m->block = block;
  m->cap = n;
  for (size_t l = 0; l < m->n_layers; l++) {
    m->layers[l].a = block;
    block += n * ((m->layers[l].out + 15) / 16 * 16);
  }
  m->d[0] = block;
  m->d[1] = block + n * m->max_width;
  return 0;
}

/* torch.nn.Linear.reset_parameters: kaiming_uniform_(a = sqrt(5)) is
 * U(-1/sqrt(in), 1/sqrt(in)), and so is the bias. */
static void torch_init(mlp *m) {
  lk_rng *rng = lk_host_rng(m->host);
  for (size_t l = 0; l < m->n_layers; l++) {
    double bound = 1 / sqrt((double)m->layers[l].in);
    lk_tensor *t[2] = {m->layers[l].w, m->layers[l].b};
    for (int k = 0; k < 2; k++)
      for (size_t i = 0; i < t[k]->numel; i++)
        ((float *)t[k]->data)[i] =
            (float)((2 * lk_rng_uniform(rng) - 1) * bound);
  }
}

static int create(lk_host *host, const lk_options *o, void **self) {
  model_blas_threads();
  size_t n;
  const double *sizes = lk_opt_doubles(o, "layers", &n);
  if (n < 2)
    return lk_fail(host, LK_ECONFIG,
                   "layers: expected at least two sizes (inputs,...,classes), "
                   "got %zu",
                   n);
  /* The host has checked that each is in [1, 16777216]; a range cannot say
   * "whole". */
  for (size_t i = 0; i < n; i++)
    if (sizes[i] != floor(sizes[i]))
      return lk_fail(host, LK_ECONFIG,
                     "layers: size %zu is %g; expected an integer", i + 1,
                     sizes[i]);
  if (sizes[n - 1] < 2)
    return lk_fail(host, LK_ECONFIG,
                   "layers: the last size is the number of classes, >= 2");
  int rc = model_check_data(host, "layers[0]", (size_t)sizes[0],
                            (size_t)sizes[n - 1], 0);
  if (rc != 0)
    return rc;
  mlp *m = calloc(1, sizeof *m);
  if (!m || !(m->layers = calloc(n - 1, sizeof *m->layers))) {
    free(m);
    return lk_fail(host, LK_ENOMEM, "out of memory");
  }
  m->host = host;
  m->n_layers = n - 1;
  m->act =
      strcmp(lk_opt_string(o, "activation"), "tanh") ? MODEL_RELU : MODEL_TANH;
  for (size_t l = 0; l < m->n_layers && rc == 0; l++) {
    layer *y = &m->layers[l];
    y->in = (size_t)sizes[l];
    y->out = (size_t)sizes[l + 1];
    if (y->out > m->max_width)
      m->max_width = y->out;
    char name[32];
    snprintf(name, sizeof name, "layer%zu", l);
    rc = model_add_dense(host, name, y->in, y->out, &y->w, &y->b);
  }
  if (rc == 0)
    rc = model_scores_init(host, o, (size_t)sizes[n - 1], &m->scores);
  bool loaded = false;
  if (rc == 0)
    rc = model_load_init(host, o, "f32 weight then bias of each layer",
                         LK_EINVAL, &loaded);
  if (rc == 0 && !loaded)
    torch_init(m);
  if (rc != 0) {
    destroy(m);
    return rc;
  }
  *self = m;
  return 0;
}

/* Every layer's activation for batch B (x checked); the last layer's are
 * the logits. */
static int layers_forward(mlp *m, const lk_batch *b) {
  size_t n = b->size;
  int rc;
  m->ready = 0;
  if ((rc = model_check_x(m->host, b, m->layers[0].in)) != 0 ||
      (rc = reserve(m, n)) != 0)
    return rc;
  const float *x = b->x.data;
  for (size_t l = 0; l < m->n_layers; l++) {
    layer *y = &m->layers[l];
    model_sgemm(false, true, n, y->out, y->in, 1, x, y->in, y->w->data, y->in,
                0, y->a, y->out);
    model_bias_act(y->a, y->b->data, n, y->out,
                   l + 1 < m->n_layers ? m->act : MODEL_NONE);
    x = y->a;
  }
  return 0;
}

static int forward(mlp *m, const lk_batch *b, lk_step_result *out, bool keep) {
  const layer *last = &m->layers[m->n_layers - 1];
  int rc = model_check_x(m->host, b, m->layers[0].in);
  if (rc == 0)
    rc = model_check_labels(m->host, b, last->out);
  if (rc == 0)
    rc = layers_forward(m, b);
  if (rc != 0)
    return rc;
  model_classify(last->a, b, last->out, keep ? m->d[0] : NULL, out);
  model_scores_batch(&m->scores, last->a, b, !keep, out);
  if (keep)
    m->ready = b->size;
  return 0;
}

/* The logits, f32 [B, classes]. */
static int predict_step(void *self, const lk_batch *b, lk_tensor *out) {
  mlp *m = self;
  const layer *last = &m->layers[m->n_layers - 1];
  int rc = layers_forward(m, b);
  if (rc == 0)
    *out = model_output("logits", last->a, b->size, last->out);
  return rc;
}

/* The logits as ONNX (loopkit export FILE.onnx): a Gemm a layer, the
 * activation between them. */
static int onnx_graph(void *self, lk_onnx *g) {
  mlp *m = self;
  size_t n = m->n_layers;
  int rc = model_onnx_io(m->host, g, m->layers[0].in, m->layers[n - 1].out);
  const char *x = "input";
  for (size_t l = 0; l < n && rc == 0; l++)
    rc = model_onnx_dense(m->host, g, x, m->layers[l].w, m->layers[l].b,
                          l + 1 < n ? m->act : MODEL_NONE,
                          l + 1 < n ? NULL : "output", &x);
  return rc;
}

MODEL_CLASSIFIER_STEPS(mlp, forward, onnx_graph);

/* From dL/dlogits (kept by the training step, per sample) back through the
 * layers; the input layer's dL/dx is never needed. */
static int backward(void *self, const lk_batch *b, double scale) {
  mlp *m = self;
  size_t n = b->size;
  int rc = model_check_ready(m->host, m->ready, n);
  if (rc != 0)
    return rc;
  float alpha = (float)(scale / (double)n); /* the loss is a mean */
  float *d = m->d[0], *spare = m->d[1];
  for (size_t l = m->n_layers; l-- > 0;) {
    layer *y = &m->layers[l];
    const float *x = l ? m->layers[l - 1].a : b->x.data;
    model_dense_grad(d, x, n, y->in, y->out, alpha, y->w->grad, y->b->grad);
    if (l == 0)
      break;
    model_sgemm(false, false, n, y->in, y->out, 1, d, y->out, y->w->data, y->in,
                0, spare, y->in);
    model_act_grad(spare, x, n * y->in, m->act);
    float *t = d;
    d = spare;
    spare = t;
  }
  return 0;
}

static const lk_option options[] = {
    {"layers", LK_OPT_DOUBLES, "784,256,128,10",
     "sizes: inputs, hidden layers..., classes (whole numbers; classes >= 2)",
     "[1, 16777216]"},
    {"activation", LK_OPT_ENUM, "relu", "between the layers", "relu|tanh"},
    {"init", LK_OPT_PATH, "",
     "initial weights: a FILE.safetensors holding layer<i>.weight [out, in] "
     "and layer<i>.bias [out] (F32 or F64, nothing else), or a raw "
     "little-endian f32 file of every layer's weight then bias (torch's "
     "nn.Linear layout); empty: torch's init from the seed",
     NULL},
    MODEL_SCORE_OPTIONS,
    {NULL, 0, NULL, NULL, NULL}};

static const lk_backward_ops backward_ops = {.backward = backward};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_PLUGIN(
    "mlp", "multilayer perceptron classifier, softmax cross-entropy", destroy,
    NULL, .step = &step_ops, .backward = &backward_ops);

/* nnmlp: a classifier written with loopkit's layer kit (loopkit/nn.h).
 *
 *   x [B, inputs] -> linear -> GELU -> linear -> logits [B, classes]
 *   loss = softmax cross-entropy (mean over the batch); metric acc
 *
 * The kit does the math; the plugin only keeps what the forward leaves for
 * the backward. Parameters fc1.weight [hidden, inputs], fc1.bias [hidden],
 * fc2.weight [classes, hidden], fc2.bias [classes] are the host's (f32,
 * checkpointed), initialised as torch.nn.Linear does, from the run's
 * generator. Batches come from a data plugin such as csv (x f32, y i32).
 *
 * Build: make (pkg-config loopkit). Run: loopkit train nnmlp.ini */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>
#include <loopkit/nn.h> /* not in loopkit.h: the kit is opt-in */

typedef struct nnmlp {
  lk_host *host;
  lk_nn *nn; /* threads and scratch memory */
  int inputs, hidden, classes;
  lk_tensor *w1, *b1, *w2, *b2;
  /* activations of the last batch, kept for backward: grown once */
  float *h, *a, *z, *dz, *da, *dh;
  size_t cap, ready;
} nnmlp;

static void destroy(void *self) {
  nnmlp *m = self;
  lk_nn_free(m->nn);
  free(m->h); /* one block: the others point into it */
  free(m);
}

/* torch.nn.Linear.reset_parameters: U(-1/sqrt(in), 1/sqrt(in)), both. */
static void init_linear(lk_rng *rng, lk_tensor *w, lk_tensor *b, int in) {
  double bound = 1 / sqrt((double)in);
  lk_tensor *t[2] = {w, b};
  for (int k = 0; k < 2; k++)
    for (size_t i = 0; i < t[k]->numel; i++)
      ((float *)t[k]->data)[i] = (float)((2 * lk_rng_uniform(rng) - 1) * bound);
}

static int create(lk_host *host, const lk_options *o, void **self) {
  int64_t in = lk_opt_int(o, "inputs"), hid = lk_opt_int(o, "hidden"),
          cls = lk_opt_int(o, "classes"), thr = lk_opt_int(o, "threads");
  if (in < 1 || hid < 1 || cls < 2 || in > 1 << 20 || hid > 1 << 20 ||
      cls > 1 << 20 || thr < 0)
    return lk_fail(host, LK_ECONFIG,
                   "inputs = %lld, hidden = %lld, classes = %lld, threads = "
                   "%lld: expected inputs, hidden >= 1, classes >= 2, "
                   "threads >= 0",
                   (long long)in, (long long)hid, (long long)cls,
                   (long long)thr);
  nnmlp *m = calloc(1, sizeof *m);
  if (!m)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  m->host = host;
  m->inputs = (int)in, m->hidden = (int)hid, m->classes = (int)cls;
  int rc = lk_nn_create(&m->nn, (int)thr, 0);
  if (rc != 0) {
    free(m);
    return lk_fail(host, rc, "%s", lk_last_error());
  }
  size_t s1[2] = {(size_t)hid, (size_t)in}, s2[2] = {(size_t)cls, (size_t)hid};
  if ((rc = lk_host_add_param(host, "fc1.weight", LK_F32, 2, s1, &m->w1)) ||
      (rc = lk_host_add_param(host, "fc1.bias", LK_F32, 1, s1, &m->b1)) ||
      (rc = lk_host_add_param(host, "fc2.weight", LK_F32, 2, s2, &m->w2)) ||
      (rc = lk_host_add_param(host, "fc2.bias", LK_F32, 1, s2, &m->b2))) {
    destroy(m);
    return rc;
  }
  init_linear(lk_host_rng(host), m->w1, m->b1, m->inputs);
  init_linear(lk_host_rng(host), m->w2, m->b2, m->hidden);
  *self = m;
  return 0;
}

/* Room for a batch of N; the buffers only grow. */
static int reserve(nnmlp *m, size_t n) {
  if (n <= m->cap)
    return 0;
  size_t H = (size_t)m->hidden, K = (size_t)m->classes;
  float *p = malloc(n * (4 * H + 2 * K) * sizeof *p);
  if (!p)
    return lk_fail(m->host, LK_ENOMEM, "out of memory for a batch of %zu", n);
  free(m->h);
  m->h = p, m->a = p + n * H, m->da = p + 2 * n * H, m->dh = p + 3 * n * H;
  m->z = p + 4 * n * H, m->dz = m->z + n * K;
  m->cap = n;
  return 0;
}

static int check_batch(nnmlp *m, const lk_batch *b) {
  if (b->size < 1 || !b->x.data || !b->y.data)
    return lk_fail(m->host, LK_EINVAL, "needs batches: set [plugins] data");
  if (b->x.dtype != LK_F32 || b->x.ndim != 2 ||
      b->x.shape[1] != (size_t)m->inputs || b->y.dtype != LK_I32)
    return lk_fail(m->host, LK_EINVAL,
                   "expected x f32 [B, %d] and y i32 [B] (csv: labels = int)",
                   m->inputs);
  return 0;
}

/* The forward pass of batch B: the loss and the accuracy. */
static int forward(nnmlp *m, const lk_batch *b, lk_step_result *out) {
  int rc = check_batch(m, b);
  if (rc == 0)
    rc = reserve(m, b->size);
  if (rc != 0)
    return rc;
  int N = (int)b->size, H = m->hidden, K = m->classes;
  double loss;
  int correct;
  /* Each call fails only on bad sizes or labels, and says which. */
  if ((rc = lk_nn_linear_forward(m->nn, m->h, b->x.data, m->w1->data,
                                 m->b1->data, N, m->inputs, H)) ||
      (rc = lk_nn_gelu_forward(m->nn, m->a, m->h, (size_t)N * H)) ||
      (rc = lk_nn_linear_forward(m->nn, m->z, m->a, m->w2->data, m->b2->data,
                                 N, H, K)) ||
      (rc = lk_nn_crossentropy(m->nn, &loss, NULL, m->z, b->y.data, N, K, 1,
                               &correct)))
    return lk_fail(m->host, rc, "%s", lk_last_error());
  out->has_loss = true;
  out->loss = loss;
  return lk_result_metric(out, "acc", (double)correct / N);
}

static int training_step(void *self, const lk_batch *b, lk_step_result *out) {
  nnmlp *m = self;
  m->ready = 0;
  int rc = forward(m, b, out);
  if (rc == 0)
    m->ready = b->size;
  return rc;
}

static int validation_step(void *self, const lk_batch *b, lk_step_result *out) {
  nnmlp *m = self;
  m->ready = 0; /* the activations are no longer the training batch's */
  return forward(m, b, out);
}

/* Adds scale * d(loss)/d(param) into the gradients, layer by layer from
 * the top: the kit's backwards add, so the host's zeroed grads fill in. */
static int backward(void *self, const lk_batch *b, double scale) {
  nnmlp *m = self;
  if (m->ready == 0 || m->ready != b->size)
    return lk_fail(m->host, LK_ESTATE,
                   "backward without a training_step on this batch");
  int N = (int)b->size, H = m->hidden, K = m->classes, rc;
  double loss;
  memset(m->dz, 0, (size_t)N * K * sizeof *m->dz);
  memset(m->da, 0, (size_t)N * H * sizeof *m->da);
  memset(m->dh, 0, (size_t)N * H * sizeof *m->dh);
  if ((rc = lk_nn_crossentropy(m->nn, &loss, m->dz, m->z, b->y.data, N, K,
                               (float)scale, NULL)) ||
      (rc = lk_nn_linear_backward(m->nn, m->da, m->w2->grad, m->b2->grad,
                                  m->dz, m->a, m->w2->data, N, H, K)) ||
      (rc = lk_nn_gelu_backward(m->nn, m->dh, m->da, m->h, (size_t)N * H)) ||
      (rc = lk_nn_linear_backward(m->nn, NULL, m->w1->grad, m->b1->grad,
                                  m->dh, b->x.data, m->w1->data, N,
                                  m->inputs, H)))
    return lk_fail(m->host, rc, "%s", lk_last_error());
  return 0;
}

static const lk_option options[] = {
    {"inputs", LK_OPT_INT, NULL, "features per sample (required)", NULL},
    {"hidden", LK_OPT_INT, "64", "units of the hidden layer", NULL},
    {"classes", LK_OPT_INT, NULL, "number of classes (required)", NULL},
    {"threads", LK_OPT_INT, "1", "the kit's threads (0: one per CPU)", NULL},
    {NULL, 0, NULL, NULL, NULL}};
static const lk_step_ops step_ops = {.training_step = training_step,
                                     .validation_step = validation_step};
static const lk_backward_ops backward_ops = {.backward = backward};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "nnmlp",
    .version = "1.0",
    .summary = "an MLP with GELU written with loopkit's layer kit",
    .options = options,
    .create = create,
    .destroy = destroy,
    .step = &step_ops,
    .backward = &backward_ops};

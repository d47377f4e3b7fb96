/* sequential: a network described in the config, layer by layer, as
 * torch.nn.Sequential holds it, trained with softmax cross-entropy against
 * the data's labels; metrics loss and acc (as mlp's); or with the loss its
 * option loss names (loss.c: nll, bce_with_logits, mse, l1, smooth_l1,
 * huber on f32 targets of the output's shape; metrics mse and mae).
 *
 *   [sequential]
 *   layers = conv2d(32, 3, padding=1), relu, maxpool2d(2), flatten,
 *            linear(10)
 *
 * (one line in the config; sequential_spec.h has the syntax). The network
 * sizes itself from the sample shape the data plugin declares, at create,
 * so that a layer that does not fit is a config error before anything is
 * trained. Parameters are named as torch names nn.Sequential's: the index
 * of the layer, counting every layer, then weight or bias ("0.weight",
 * "3.bias"); batch norm keeps running_mean, running_var and
 * num_batches_tracked as checkpointed state under the same names. Initial
 * values are torch's defaults (kaiming_uniform_(a = sqrt(5)) for weights,
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for biases; the norms 1 and 0), drawn
 * from the run's generator in parameter order, or read from a file (a
 * .safetensors by name, through lk_host_load_params, or raw f32).
 *
 * Every layer is the layer kit's (loopkit/nn.h), on the run's threads:
 * results are the same bit for bit at any thread count and from run to
 * run. Validation and test run the network in eval mode (batch norm on
 * its running statistics, no dropout); dropout draws its masks from the
 * run's generator, so a resumed run draws the same ones.
 *
 * A net over tokens (the data's samples i32 [T], text's) starts with an
 * embedding; with the next token as the target at every position it is a
 * language model: [T, V] logits, the loss and acc per token, val_ppl as
 * gpt's. Its option block_size declares the length it takes, as gpt's
 * does, so that text's block_size = auto takes it (run/auto.c).
 *
 * The same plugin is also the scheduler torch calls SequentialLR
 * (sequential_lr.c): an instance given schedulers and milestones instead
 * of layers, named apart from the model (scheduler = lrs:sequential). */
#include <limits.h>

#include <loopkit/nn.h>

#include "bundled.h"
#include "loss.h"
#include "model_common.h"
#include "sequential_lr.h"
#include "sequential_spec.h"

#define SEQ_DIMS LK_MAX_DIMS /* of one sample */

typedef struct seq_layer {
  seq_spec s;
  int in_ndim, in[SEQ_DIMS], out_ndim, out[SEQ_DIMS];
  size_t in_numel, out_numel;
  size_t rows;  /* linear, layernorm: rows per sample */
  bool grad_in; /* a layer before this one has parameters */
  /* ReLU then max-pool run as max-pool then ReLU: the same values and the
   * same gradients (max and ReLU commute; where a window's maximum is not
   * positive both give it no gradient), on a quarter of the values for a
   * 2 x 2 pool. pooled_relu: this ReLU is done by the pool after it;
   * relu_after: this pool does the ReLU before it. */
  bool pooled_relu, relu_after;
  lk_nn_conv2d conv; /* n set per batch */
  lk_nn_pool2d pool;
  lk_tensor *w, *b;                /* parameters, or NULL */
  lk_tensor *rmean, *rvar, *count; /* batch norm's state */
  float *y;           /* [cap, out_numel]: the output (flatten: the input's) */
  int32_t *argmax;    /* maxpool2d [cap, out_numel] */
  uint8_t *mask;      /* dropout [cap, out_numel] */
  float *mean, *rstd; /* batch norm [C]; layer norm [cap rows] */
} seq_layer;

typedef struct seq {
  seq_what what; /* SEQ_WHAT_MODEL (sequential_lr.h) */
  lk_host *host;
  lk_nn *nn;
  char *text; /* the layers option, which the specs point into */
  size_t n_layers, classes, max_numel;
  bool tokens;      /* the samples are tokens, i32 [T], into an embedding */
  bool lm;          /* a target at every token: a language model */
  size_t positions; /* logit rows a sample: T of a language model, else 1 */
  seq_layer *layers;
  float *grad[2]; /* [cap, max_numel]: dL/d(activation), ping-pong */
  size_t cap;     /* batch size the buffers hold; they only grow */
  size_t ready;   /* batch size of the training step backward may use, or 0 */
  model_scores scores; /* top-k and F1 */
  seq_loss loss;       /* loss.c: the loss option */
} seq;

static const char *kind_name(const seq_layer *l) {
  return seq_kinds[l->s.kind].name;
}

/* "[32, 14, 14]" */
static const char *dims(const int *d, int n, char *buf, size_t len) {
  int used = snprintf(buf, len, "[");
  for (int i = 0; i < n && used > 0 && (size_t)used < len; i++)
    used +=
        snprintf(buf + used, len - (size_t)used, "%s%d", i ? ", " : "", d[i]);
  if (used > 0 && (size_t)used < len)
    snprintf(buf + used, len - (size_t)used, "]");
  return buf;
}

static void free_buffers(seq *m) {
  for (size_t i = 0; m->layers && i < m->n_layers; i++) {
    seq_layer *l = &m->layers[i];
    if (l->s.kind != SEQ_FLATTEN && !l->pooled_relu)
      free(l->y);
    free(l->argmax);
    free(l->mask);
    if (l->s.kind == SEQ_LAYERNORM) {
      free(l->mean);
      free(l->rstd);
      l->mean = l->rstd = NULL;
    }
    l->y = NULL, l->argmax = NULL, l->mask = NULL;
  }
  free(m->grad[0]);
  free(m->grad[1]);
  m->grad[0] = m->grad[1] = NULL;
  m->cap = 0;
}

static void destroy(void *self) {
  seq *m = self;
  if (!m)
    return;
  free_buffers(m);
  for (size_t i = 0; m->layers && i < m->n_layers; i++)
    if (m->layers[i].s.kind == SEQ_BATCHNORM2D ||
        m->layers[i].s.kind == SEQ_BATCHNORM1D) {
      free(m->layers[i].mean);
      free(m->layers[i].rstd);
    }
  free(m->layers);
  free(m->text);
  lk_nn_free(m->nn);
  model_scores_free(&m->scores);
  seq_loss_free(&m->loss);
  free(m);
}

/* ---- building the network from the data's sample shape ------------------ */

/* "layers: layer I (KIND): ..." with the shapes the layer gets. */
#define SHAPE_FAIL(host, i, l, fmt, ...)                                       \
  lk_fail(host, LK_ECONFIG, "layers: layer %zu (%s): " fmt, (i), kind_name(l), \
          __VA_ARGS__)

/* The most values one sample of a layer's input or output may hold: the
 * kit's sizes are ints, and a batch multiplies them again. */
#define SEQ_MAX_NUMEL ((size_t)1 << 30)

/* The values of shape D [N] into *OUT, through lk_size_mul; false when
 * they do not fit a size_t. */
static bool numel(const int *d, int n, size_t *out) {
  size_t t = 1;
  for (int i = 0; i < n; i++)
    if (d[i] < 0 || !lk_size_mul(t, (size_t)d[i], &t))
      return false;
  *out = t;
  return true;
}

/* A conv2d's output [out_channels, H', W'] or a pool's [C, H', W'] from
 * its input image (A in messages): the two share their geometry, but for
 * the stride, which a pool's window gives by default. */
static int infer_window(lk_host *host, size_t i, seq_layer *l, const char *a) {
  const seq_spec *s = &l->s;
  bool conv = s->kind == SEQ_CONV2D;
  const char *what = conv ? "kernel" : "window";
  lk_nn_pool2d g = {.n = 1,
                    .c = l->in[0],
                    .h = l->in[1],
                    .w = l->in[2],
                    .kh = s->kh,
                    .kw = s->kw,
                    .stride_h = s->sh  ? s->sh
                                : conv ? 1
                                       : s->kh,
                    .stride_w = s->sw  ? s->sw
                                : conv ? 1
                                       : s->kw,
                    .pad_h = s->ph,
                    .pad_w = s->pw};
  if (!conv && (2 * s->ph > s->kh || 2 * s->pw > s->kw))
    return SHAPE_FAIL(host, i, l,
                      "padding %d x %d for a window of %d x %d: at most "
                      "half the window (as torch requires)",
                      s->ph, s->pw, s->kh, s->kw);
  if (g.h + 2 * s->ph < s->kh || g.w + 2 * s->pw < s->kw)
    return SHAPE_FAIL(host, i, l,
                      "input %s, %s %d x %d with padding %d x %d: the %s is "
                      "larger than the padded image",
                      a, what, s->kh, s->kw, s->ph, s->pw, what);
  int oh, ow, rc;
  if (conv) { /* lk_nn_conv2d's fields in order: the pool's and oc */
    l->conv =
        (lk_nn_conv2d){g.n,  g.c,        g.h,        g.w,     s->out, g.kh,
                       g.kw, g.stride_h, g.stride_w, g.pad_h, g.pad_w};
    rc = lk_nn_conv2d_size(&l->conv, &oh, &ow);
  } else {
    l->pool = g;
    rc = lk_nn_pool2d_size(&l->pool, &oh, &ow);
  }
  if (rc != 0)
    return SHAPE_FAIL(host, i, l, "input %s: %s", a, lk_last_error());
  l->out[0] = conv ? s->out : g.c, l->out[1] = oh, l->out[2] = ow;
  return 0;
}

/* flatten's output: torch's start_dim and end_dim count the batch as 0. */
static int infer_flatten(lk_host *host, size_t i, seq_layer *l, const char *a) {
  const seq_spec *s = &l->s;
  int nd = l->in_ndim + 1, st = s->start_dim, en = s->end_dim;
  st = st < 0 ? st + nd : st;
  en = en < 0 ? en + nd : en;
  if (st < 0 || st >= nd || en < 0 || en >= nd)
    return SHAPE_FAIL(host, i, l,
                      "start_dim %d, end_dim %d for an input of %d "
                      "dimensions with the batch (%s per sample)",
                      s->start_dim, s->end_dim, nd, a);
  if (st == 0)
    return SHAPE_FAIL(host, i, l,
                      "start_dim %d would merge the batch into the samples",
                      s->start_dim);
  if (en < st)
    return SHAPE_FAIL(host, i, l, "end_dim %d is before start_dim %d",
                      s->end_dim, s->start_dim);
  /* the kit's shape function, on the sample's dimensions */
  if (lk_nn_flatten(l->in, l->in_ndim, st - 1, en - 1, l->out, &l->out_ndim) !=
      0)
    return SHAPE_FAIL(host, i, l, "input %s: %s", a, lk_last_error());
  return 0;
}

/* The output shape of layer I from its input shape (set in L->in). */
static int infer(lk_host *host, size_t i, seq_layer *l) {
  const seq_spec *s = &l->s;
  char a[64], b[64];
  dims(l->in, l->in_ndim, a, sizeof a);
  if (!numel(l->in, l->in_ndim, &l->in_numel) || l->in_numel > SEQ_MAX_NUMEL)
    return SHAPE_FAIL(host, i, l,
                      "input %s: too large (%zu values a sample, more than "
                      "2^30)",
                      a, l->in_numel);
  memcpy(l->out, l->in, sizeof l->in);
  l->out_ndim = l->in_ndim;
  const char *image = "an image [C, H, W] (the data's samples, or a conv2d's "
                      "or a pool's output)";
  switch (s->kind) {
  case SEQ_CONV2D:
  case SEQ_MAXPOOL2D:
  case SEQ_AVGPOOL2D:
  case SEQ_BATCHNORM2D:
    if (l->in_ndim != 3)
      return SHAPE_FAIL(host, i, l, "input %s; expected %s", a, image);
    break;
  case SEQ_BATCHNORM1D:
    if (l->in_ndim != 1 && l->in_ndim != 2)
      return SHAPE_FAIL(host, i, l, "input %s; expected [C] or [C, L]", a);
    break;
  default: break;
  }
  if (s->in && s->in != l->in[s->kind == SEQ_LINEAR || s->kind == SEQ_LAYERNORM
                                  ? l->in_ndim - 1
                                  : 0]) {
    const char *what = s->kind == SEQ_CONV2D      ? "in_channels"
                       : s->kind == SEQ_LINEAR    ? "in_features"
                       : s->kind == SEQ_LAYERNORM ? "normalized_shape"
                                                  : "num_features";
    return SHAPE_FAIL(host, i, l, "%s = %d, but its input is %s", what, s->in,
                      a);
  }
  int rc = 0;
  switch (s->kind) {
  case SEQ_CONV2D:
  case SEQ_MAXPOOL2D:
  case SEQ_AVGPOOL2D: rc = infer_window(host, i, l, a); break;
  case SEQ_FLATTEN: rc = infer_flatten(host, i, l, a); break;
  case SEQ_LINEAR:
    l->out[l->in_ndim - 1] = s->out;
    /* fallthrough */
  case SEQ_LAYERNORM:
    l->rows = l->in_numel / (size_t)l->in[l->in_ndim - 1];
    break;
  case SEQ_EMBEDDING: /* [T] tokens (check_tokens) to [T, embedding_dim] */
    l->out[l->in_ndim] = s->out;
    l->out_ndim = l->in_ndim + 1;
    l->rows = l->in_numel;
    break;
  default: break;
  }
  if (rc != 0)
    return rc;
  if (!numel(l->out, l->out_ndim, &l->out_numel) ||
      l->out_numel > SEQ_MAX_NUMEL)
    return SHAPE_FAIL(host, i, l,
                      "input %s, output %s: too large (more than 2^30 "
                      "values)",
                      a, dims(l->out, l->out_ndim, b, sizeof b));
  return 0;
}

/* Parameters and state of layer I, named as torch's nn.Sequential names
 * them. */
static int add_params(seq *m, size_t i, seq_layer *l) {
  lk_host *host = m->host;
  const seq_spec *s = &l->s;
  char name[64];
  size_t shape[4];
  int rc = 0;
  size_t c = (size_t)l->in[0];
  switch (s->kind) {
  case SEQ_CONV2D: /* weight [out, in, kh, kw]; linear's [out, in] */
  case SEQ_LINEAR:
    shape[0] = (size_t)s->out;
    shape[1] = s->kind == SEQ_LINEAR ? (size_t)l->in[l->in_ndim - 1] : c;
    shape[2] = (size_t)s->kh, shape[3] = (size_t)s->kw;
    snprintf(name, sizeof name, "%zu.weight", i);
    rc = lk_host_add_param(host, name, LK_F32, s->kind == SEQ_LINEAR ? 2 : 4,
                           shape, &l->w);
    if (rc == 0 && s->bias) {
      snprintf(name, sizeof name, "%zu.bias", i);
      rc = lk_host_add_param(host, name, LK_F32, 1, shape, &l->b);
    }
    return rc;
  case SEQ_EMBEDDING:
    shape[0] = (size_t)s->vocab, shape[1] = (size_t)s->out;
    snprintf(name, sizeof name, "%zu.weight", i);
    return lk_host_add_param(host, name, LK_F32, 2, shape, &l->w);
  case SEQ_LAYERNORM:
    c = (size_t)l->in[l->in_ndim - 1];
    /* fallthrough */
  case SEQ_BATCHNORM2D:
  case SEQ_BATCHNORM1D:
    if (s->bias) {
      snprintf(name, sizeof name, "%zu.weight", i);
      rc = lk_host_add_param(host, name, LK_F32, 1, &c, &l->w);
      snprintf(name, sizeof name, "%zu.bias", i);
      if (rc == 0)
        rc = lk_host_add_param(host, name, LK_F32, 1, &c, &l->b);
    }
    if (rc != 0 || s->kind == SEQ_LAYERNORM)
      return rc;
    snprintf(name, sizeof name, "%zu.running_mean", i);
    rc = lk_host_add_buffer(host, name, LK_F32, 1, &c, 0, &l->rmean);
    snprintf(name, sizeof name, "%zu.running_var", i);
    if (rc == 0)
      rc = lk_host_add_buffer(host, name, LK_F32, 1, &c, 0, &l->rvar);
    size_t one = 1;
    snprintf(name, sizeof name, "%zu.num_batches_tracked", i);
    if (rc == 0) /* torch's is an int64; an f64 counts exactly to 2^53 */
      rc = lk_host_add_buffer(host, name, LK_F64, 0, &one, LK_BUFFER_COUNT,
                              &l->count);
    if (rc == 0 && (!(l->mean = malloc(c * sizeof(float))) ||
                    !(l->rstd = malloc(c * sizeof(float)))))
      rc = lk_fail(host, LK_ENOMEM, "out of memory");
    if (rc == 0)
      for (size_t k = 0; k < c; k++)
        ((float *)l->rvar->data)[k] = 1;
    return rc;
  default: return 0;
  }
}

/* fan_in of a layer's weight, as torch's _calculate_fan_in_and_fan_out. */
static double fan_in(const seq_layer *l) {
  return (double)(l->w->numel / l->w->shape[0]);
}

/* torch's reset_parameters: conv2d and linear weights kaiming_uniform_(a =
 * sqrt(5)), which is U(-1/sqrt(fan_in), 1/sqrt(fan_in)), their biases the
 * same; the norms' weights 1 and biases 0; embedding's N(0, 1). In
 * parameter order. */
static void torch_init(seq *m) {
  lk_rng *rng = lk_host_rng(m->host);
  for (size_t i = 0; i < m->n_layers; i++) {
    seq_layer *l = &m->layers[i];
    if (!l->w)
      continue;
    if (l->s.kind == SEQ_EMBEDDING) {
      for (size_t k = 0; k < l->w->numel; k++)
        ((float *)l->w->data)[k] = (float)lk_rng_normal(rng);
      continue;
    }
    if (l->s.kind != SEQ_CONV2D && l->s.kind != SEQ_LINEAR) {
      for (size_t k = 0; k < l->w->numel; k++)
        ((float *)l->w->data)[k] = 1;
      continue; /* the bias is zero already */
    }
    double bound = 1 / sqrt(fan_in(l));
    lk_tensor *t[2] = {l->w, l->b};
    for (int j = 0; j < 2; j++)
      for (size_t k = 0; t[j] && k < t[j]->numel; k++)
        ((float *)t[j]->data)[k] =
            (float)((2 * lk_rng_uniform(rng) - 1) * bound);
  }
}

/* A classifier's output (loss cross_entropy or nll): [classes], or of a
 * language model [T, V]; SHAPE [ND] the last layer's. */
static int check_classes(seq *m, const lk_sample_shape *sh, const int *shape,
                         int nd) {
  lk_host *host = m->host;
  seq_layer *last = &m->layers[m->n_layers - 1];
  char a[64];
  dims(last->out, last->out_ndim, a, sizeof a);
  char y[96];
  if (sh->n_classes == 0)
    return lk_fail(host, LK_ECONFIG,
                   "the network classifies (loss = %s takes class labels, "
                   "i32), but the data's targets are not class labels: %s; "
                   "a regression loss (mse, l1, smooth_l1, huber) or "
                   "bce_with_logits takes f32 targets",
                   seq_loss_name(&m->loss), seq_loss_y_text(sh, y, sizeof y));
  m->lm = m->tokens && sh->y_dtype == LK_I32 && sh->y_ndim == 1 &&
          sh->y_shape[0] == sh->x_shape[0];
  m->positions = m->lm ? sh->x_shape[0] : 1;
  if (m->lm) {
    /* the next token at every position: [T, V] logits, V at least the
     * data's tokens (a vocabulary, as gpt's vocab_size) */
    if (nd != 2 || (size_t)shape[0] != m->positions ||
        (size_t)shape[1] < sh->n_classes)
      return SHAPE_FAIL(host, m->n_layers - 1, last,
                        "output %s, but the data's targets are the next "
                        "token at each of %zu positions, up to %zu: the last "
                        "layer must give [%zu, V] with V >= %zu",
                        a, m->positions, sh->n_classes - 1, m->positions,
                        sh->n_classes);
    m->classes = (size_t)shape[1];
  } else if (nd != 1 || (size_t)shape[0] != sh->n_classes)
    return SHAPE_FAIL(host, m->n_layers - 1, last,
                      "output %s, but the data has %zu classes: the last "
                      "layer must give [%zu]%s",
                      a, sh->n_classes, sh->n_classes,
                      nd != 1 ? " (a flatten before it?)" : "");
  else
    m->classes = sh->n_classes;
  return seq_loss_classes(host, &m->loss, m->classes);
}

/* The network for the data's samples: each layer's shape, then the
 * parameters. */
static int build(seq *m, const lk_sample_shape *sh) {
  lk_host *host = m->host;
  int shape[SEQ_DIMS], nd = (int)sh->x_ndim;
  for (int d = 0; d < nd; d++)
    shape[d] = (int)sh->x_shape[d];
  for (size_t i = 0; i < m->n_layers; i++) {
    seq_layer *l = &m->layers[i];
    memcpy(l->in, shape, sizeof shape);
    l->in_ndim = nd;
    int rc = infer(host, i, l);
    if (rc != 0)
      return rc;
    memcpy(shape, l->out, sizeof shape);
    nd = l->out_ndim;
    if (l->in_numel > m->max_numel)
      m->max_numel = l->in_numel;
    if (l->out_numel > m->max_numel)
      m->max_numel = l->out_numel;
  }
  m->positions = 1;                  /* a language model's: check_classes */
  int rc = seq_loss_labels(&m->loss) /* else loss.c's f32 targets */
               ? check_classes(m, sh, shape, nd)
               : seq_loss_shape(host, &m->loss, sh, shape, nd, &m->classes);
  if (rc != 0)
    return rc;
  bool params_before = false;
  for (size_t i = 0; i < m->n_layers; i++) {
    rc = add_params(m, i, &m->layers[i]);
    if (rc != 0)
      return rc;
    m->layers[i].grad_in = params_before;
    params_before |= m->layers[i].w != NULL || m->layers[i].b != NULL;
    if (i > 0 && m->layers[i].s.kind == SEQ_MAXPOOL2D &&
        m->layers[i - 1].s.kind == SEQ_RELU)
      m->layers[i - 1].pooled_relu = m->layers[i].relu_after = true;
  }
  return 0;
}

/* Token samples (i32 [T], as text's) go into an embedding, the first
 * layer, and nothing else takes them; BLOCK (the option block_size), when
 * not 0, is the length they must have: the model declares its context, as
 * gpt's block_size does, and text's block_size = auto takes it. */
static int check_tokens(seq *m, const lk_sample_shape *sh, int64_t block) {
  char got[LK_MAX_DIMS * 22 + 8];
  model_sample_text(sh, got, sizeof got);
  m->tokens = sh->x_dtype == LK_I32 && sh->x_ndim == 1;
  if (m->tokens && m->layers[0].s.kind != SEQ_EMBEDDING)
    return lk_fail(m->host, LK_ECONFIG,
                   "layers: the data's samples are tokens, %s: the first "
                   "layer must be embedding(num_embeddings, embedding_dim)",
                   got);
  for (size_t i = 0; i < m->n_layers; i++)
    if (m->layers[i].s.kind == SEQ_EMBEDDING && (i > 0 || !m->tokens))
      return SHAPE_FAIL(m->host, i, &m->layers[i],
                        "takes tokens, i32 [T], as the first layer; %s",
                        i > 0 ? "it is not the first"
                              : "the data's samples are not tokens");
  if (block > 0 && !m->tokens)
    return lk_fail(m->host, LK_ECONFIG,
                   "block_size = %lld is the length of the token sequences "
                   "an embedding takes, but the data's samples are %s",
                   (long long)block, got);
  if (block > 0 && sh->x_shape[0] != (size_t)block)
    return lk_fail(m->host, LK_ECONFIG,
                   "block_size = %lld, but the data's samples are %zu tokens "
                   "long (the data's block_size)",
                   (long long)block, sh->x_shape[0]);
  /* a language model's targets are its tokens: their range is the data's */
  const seq_spec *e = &m->layers[0].s;
  if (m->tokens && sh->n_classes > (size_t)e->vocab && sh->y_dtype == LK_I32 &&
      sh->y_ndim == 1 && sh->y_shape[0] == sh->x_shape[0])
    return SHAPE_FAIL(m->host, (size_t)0, &m->layers[0],
                      "num_embeddings = %d, but the data's tokens go up to "
                      "%zu",
                      e->vocab, sh->n_classes - 1);
  return 0;
}

static int create(lk_host *host, const lk_options *o, void **self) {
  lk_sample_shape sh;
  int rc = lk_host_data_shape(host, &sh);
  if (rc == LK_ENOTFOUND)
    return lk_fail(host, LK_ECONFIG,
                   "sizes itself from the data's sample shape: [plugins] "
                   "data must name a data plugin that declares it (idx, csv, "
                   "npy): %s",
                   lk_last_error());
  if (rc != 0) /* the host's message names the plugin and the shape */
    return lk_fail(host, LK_ECONFIG,
                   "sizes itself from the data's sample shape: %s",
                   lk_last_error());
  char got[LK_MAX_DIMS * 22 + 8];
  model_sample_text(&sh, got, sizeof got);
  if ((sh.x_dtype != LK_F32 || sh.x_ndim < 1 || sh.x_ndim > 3) &&
      (sh.x_dtype != LK_I32 || sh.x_ndim != 1))
    return lk_fail(host, LK_ECONFIG,
                   "the data's samples are %s; expected f32 with 1 to 3 "
                   "dimensions, or tokens i32 [T] for an embedding",
                   got);
  for (size_t i = 0; i < sh.x_ndim; i++)
    if (sh.x_shape[i] > (1u << 24))
      return lk_fail(host, LK_ECONFIG,
                     "the data's samples are %s: dimension %zu is %zu, more "
                     "than 2^24",
                     got, i, sh.x_shape[i]);
  seq *m = calloc(1, sizeof *m);
  if (!m)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  m->host = host;
  seq_spec *specs = NULL;
  rc = (m->text = strdup(lk_opt_string(o, "layers")))
           ? seq_parse(host, m->text, &specs, &m->n_layers)
           : lk_fail(host, LK_ENOMEM, "out of memory");
  if (rc == 0 && !(m->layers = calloc(m->n_layers, sizeof *m->layers)))
    rc = lk_fail(host, LK_ENOMEM, "out of memory");
  for (size_t i = 0; rc == 0 && i < m->n_layers; i++)
    m->layers[i].s = specs[i];
  free(specs);
  if (rc == 0)
    rc = seq_loss_init(host, o, &m->loss);
  if (rc == 0)
    rc = check_tokens(m, &sh, lk_opt_int(o, "block_size"));
  if (rc == 0)
    rc = build(m, &sh);
  bool loaded = false;
  if (rc == 0)
    rc = model_load_init(host, o, "every parameter in order, f32", LK_ECONFIG,
                         &loaded);
  if (rc == 0 && !loaded)
    torch_init(m);
  if (rc == 0 && lk_nn_create(&m->nn, lk_host_threads(host), 0) != 0)
    rc = lk_fail(host, LK_ENOMEM, "%s", lk_last_error());
  if (rc == 0 && !seq_loss_labels(&m->loss) &&
      (lk_opt_int(o, "top_k") > 1 || lk_opt_bool(o, "f1")))
    rc = lk_fail(host, LK_ECONFIG,
                 "%s: top_k and f1 score classes, but loss = %s takes f32 "
                 "targets",
                 lk_opt_where(o, lk_opt_bool(o, "f1") ? "f1" : "top_k"),
                 seq_loss_name(&m->loss));
  if (rc == 0)
    rc = model_scores_init(host, o, m->classes, &m->scores);
  if (rc != 0) {
    destroy(m);
    return rc;
  }
  *self = m;
  return 0;
}

/* Batch norm's counts and variances, as a checkpoint restored them. */
static int check_state(void *self) {
  seq *m = self;
  for (size_t i = 0; i < m->n_layers; i++) {
    seq_layer *l = &m->layers[i];
    if (!l->rvar)
      continue;
    int rc = lk_state_check(m->host, l->rvar, 0, INFINITY, false);
    if (rc == 0)
      rc = lk_state_check(m->host, l->count, 0, LK_STATE_MAX_COUNT, true);
    if (rc != 0)
      return rc;
  }
  return 0;
}

/* ---- the batch buffers ------------------------------------------------- */

/* The buffers for a batch of N. The kit's sizes are ints: N samples of
 * the widest layer's values must fit one, and then so does every product
 * below. */
static int reserve(seq *m, size_t n) {
  size_t most;
  if (!lk_size_mul(n, m->max_numel, &most) || most > INT_MAX)
    return lk_fail(m->host, LK_EINVAL,
                   "a batch of %zu is too large: its widest layer holds %zu "
                   "values a sample, and a batch of them at most 2^31 - 1",
                   n, m->max_numel);
  if (n <= m->cap)
    return 0;
  free_buffers(m);
  bool ok = true;
  for (size_t i = 0; i < m->n_layers; i++) {
    seq_layer *l = &m->layers[i];
    size_t count = n * l->out_numel; /* <= most */
    /* flatten's and a pooled ReLU's are their input's (forward) */
    if (l->s.kind != SEQ_FLATTEN && !l->pooled_relu)
      ok = (l->y = model_alloc(n, l->out_numel)) && ok;
    if (l->s.kind == SEQ_MAXPOOL2D)
      ok = (l->argmax = malloc(count * sizeof *l->argmax)) && ok;
    if (l->s.kind == SEQ_DROPOUT)
      ok = (l->mask = malloc(count)) && ok;
    if (l->s.kind == SEQ_LAYERNORM)
      ok = (l->mean = malloc(n * l->rows * sizeof(float))) &&
           (l->rstd = malloc(n * l->rows * sizeof(float))) && ok;
  }
  for (int k = 0; k < 2; k++)
    ok = (m->grad[k] = model_alloc(n, m->max_numel)) && ok;
  if (!ok) {
    free_buffers(m);
    return lk_fail(m->host, LK_ENOMEM, "out of memory for a batch of %zu", n);
  }
  m->cap = n;
  return 0;
}

/* ---- forward and backward, layer by layer ------------------------------- */

static int kit_failed(seq *m, size_t i, const seq_layer *l) {
  return lk_fail(m->host, LK_EPLUGIN, "layer %zu (%s): %s", i, kind_name(l),
                 lk_last_error());
}

/* Layer L of a batch of N from X into l->y. */
static int layer_forward(seq *m, seq_layer *l, const float *x, int n,
                         bool training) {
  lk_nn *nn = m->nn;
  const seq_spec *s = &l->s;
  size_t count = (size_t)n * l->out_numel;
  const float *w = l->w ? l->w->data : NULL, *b = l->b ? l->b->data : NULL;
  switch (s->kind) {
  case SEQ_CONV2D:
    l->conv.n = n;
    return lk_nn_conv2d_forward(nn, &l->conv, l->y, x, w, b);
  case SEQ_MAXPOOL2D: {
    l->pool.n = n;
    int rc = lk_nn_maxpool2d_forward(nn, &l->pool, l->y, l->argmax, x);
    return rc == 0 && l->relu_after ? lk_nn_relu_forward(nn, l->y, l->y, count)
                                    : rc;
  }
  case SEQ_AVGPOOL2D:
    l->pool.n = n;
    return lk_nn_avgpool2d_forward(nn, &l->pool, l->y, x);
  case SEQ_BATCHNORM2D:
  case SEQ_BATCHNORM1D: {
    int c = l->in[0], hw = l->in_ndim == 1 ? 1 : (int)(l->in_numel / (size_t)c);
    int rc = lk_nn_batchnorm_forward(
        nn, l->y, l->mean, l->rstd, x, w, b, l->rmean->data, l->rvar->data, n,
        c, hw, training, (float)s->momentum, (float)s->eps);
    if (rc == 0 && training)
      *(double *)l->count->data += 1;
    return rc;
  }
  case SEQ_LAYERNORM:
    return lk_nn_layernorm_forward(nn, l->y, l->mean, l->rstd, x, w, b,
                                   n * (int)l->rows, l->in[l->in_ndim - 1],
                                   (float)s->eps);
  case SEQ_RELU:
    if (l->pooled_relu) { /* the pool after it does it */
      l->y = (float *)x;
      return 0;
    }
    return lk_nn_relu_forward(nn, l->y, x, count);
  case SEQ_GELU: return lk_nn_gelu_forward(nn, l->y, x, count);
  case SEQ_TANH: return lk_nn_tanh_forward(nn, l->y, x, count);
  case SEQ_SIGMOID: return lk_nn_sigmoid_forward(nn, l->y, x, count);
  case SEQ_DROPOUT:
    return lk_nn_dropout_forward(nn, l->y, l->mask, x, count, (float)s->p,
                                 training, lk_host_rng(m->host));
  case SEQ_FLATTEN: /* the same memory, another shape */
    l->y = (float *)x;
    return 0;
  case SEQ_LINEAR:
    return lk_nn_linear_forward(nn, l->y, x, w, b, n * (int)l->rows,
                                l->in[l->in_ndim - 1], s->out);
  case SEQ_EMBEDDING: /* X is the batch's tokens */
    return lk_nn_embedding_forward(nn, l->y, (const int32_t *)(const void *)x,
                                   w, n * (int)l->rows, s->vocab, s->out);
  default: return LK_EINVAL;
  }
}

/* Layer L's backward for a batch of N: DINP [n, in_numel] += the gradient
 * through it (NULL: not needed), its parameters' gradients += theirs
 * (scaled already: DOUT holds d(scale loss)/d(output)). X is its input. */
static int layer_backward(seq *m, seq_layer *l, float *dinp, const float *dout,
                          const float *x, int n) {
  lk_nn *nn = m->nn;
  const seq_spec *s = &l->s;
  size_t count = (size_t)n * l->out_numel;
  const float *w = l->w ? l->w->data : NULL;
  float *dw = l->w ? l->w->grad : NULL, *db = l->b ? l->b->grad : NULL;
  switch (s->kind) {
  case SEQ_CONV2D:
    l->conv.n = n;
    return lk_nn_conv2d_backward(nn, &l->conv, dinp, dw, db, dout, x, w);
  case SEQ_MAXPOOL2D:
    l->pool.n = n;
    return dinp ? lk_nn_maxpool2d_backward(nn, &l->pool, dinp, dout, l->argmax)
                : 0;
  case SEQ_AVGPOOL2D:
    l->pool.n = n;
    return dinp ? lk_nn_avgpool2d_backward(nn, &l->pool, dinp, dout) : 0;
  case SEQ_BATCHNORM2D:
  case SEQ_BATCHNORM1D: {
    int c = l->in[0], hw = l->in_ndim == 1 ? 1 : (int)(l->in_numel / (size_t)c);
    return lk_nn_batchnorm_backward(nn, dinp, dw, db, dout, x, w, l->mean,
                                    l->rstd, n, c, hw, true);
  }
  case SEQ_LAYERNORM:
    return lk_nn_layernorm_backward(nn, dinp, dw, db, dout, x, w, l->mean,
                                    l->rstd, n * (int)l->rows,
                                    l->in[l->in_ndim - 1]);
  case SEQ_RELU:
    return dinp ? lk_nn_relu_backward(nn, dinp, dout, l->y, count) : 0;
  case SEQ_GELU:
    return dinp ? lk_nn_gelu_backward(nn, dinp, dout, x, count) : 0;
  case SEQ_TANH:
    return dinp ? lk_nn_tanh_backward(nn, dinp, dout, l->y, count) : 0;
  case SEQ_SIGMOID:
    return dinp ? lk_nn_sigmoid_backward(nn, dinp, dout, l->y, count) : 0;
  case SEQ_DROPOUT:
    return dinp ? lk_nn_dropout_backward(nn, dinp, dout, l->mask, count,
                                         (float)s->p, true)
                : 0;
  case SEQ_LINEAR:
    return lk_nn_linear_backward(nn, dinp, dw, db, dout, x, w, n * (int)l->rows,
                                 l->in[l->in_ndim - 1], s->out);
  case SEQ_EMBEDDING: /* the first layer: no input gradient */
    return lk_nn_embedding_backward(nn, dw, dout,
                                    (const int32_t *)(const void *)x,
                                    n * (int)l->rows, s->vocab, s->out);
  default: return LK_EINVAL;
  }
}

/* x: f32 samples, or i32 [B, T] tokens. */
static int check_x(seq *m, const lk_batch *b) {
  const lk_tensor *x = &b->x;
  size_t T = m->layers[0].in_numel;
  if (!m->tokens)
    return model_check_x(m->host, b, T);
  if (b->size >= 1 && x->data && x->dtype == LK_I32 && x->ndim == 2 &&
      x->shape[0] == b->size && x->shape[1] == T)
    return 0;
  char got[96];
  return lk_fail(m->host, LK_EINVAL,
                 "x: expected i32 [%zu, %zu] tokens, got %s", b->size, T,
                 model_shape(x, got, sizeof got));
}

/* y: a label a sample, or with a target at every position i32 [B, T];
 * FLAT is B with them as one label a row of logits (B * T rows). */
static int check_y(seq *m, const lk_batch *b, lk_batch *flat) {
  const lk_tensor *y = &b->y;
  size_t T = m->positions;
  *flat = *b;
  if (!seq_loss_labels(&m->loss))
    return seq_loss_check_y(m->host, &m->loss, b);
  if (m->lm) {
    char got[96];
    if (!y->data || y->dtype != LK_I32 || y->ndim != 2 ||
        y->shape[0] != b->size || y->shape[1] != T)
      return lk_fail(m->host, LK_EINVAL,
                     "y: expected i32 [%zu, %zu], the next token at every "
                     "position, got %s",
                     b->size, T, model_shape(y, got, sizeof got));
    flat->size = b->size * T;
    flat->y.ndim = 1;
    flat->y.shape[0] = flat->size;
  }
  return model_check_labels(m->host, flat, m->classes);
}

/* Every layer forward on batch B (x checked): the last one's y holds the
 * logits. */
static int layers_forward(seq *m, const lk_batch *b, bool training) {
  int rc;
  m->ready = 0;
  if ((rc = check_x(m, b)) != 0)
    return rc;
  if ((rc = reserve(m, b->size)) != 0)
    return rc;
  int n = (int)b->size;
  const float *x = b->x.data;
  for (size_t i = 0; i < m->n_layers; i++) {
    seq_layer *l = &m->layers[i];
    if (layer_forward(m, l, x, n, training) != 0)
      return kit_failed(m, i, l);
    x = l->y;
  }
  return 0;
}

static int forward(seq *m, const lk_batch *b, lk_step_result *out,
                   bool training) {
  lk_batch flat; /* a row of logits a label */
  int rc = check_x(m, b);
  if (rc == 0)
    rc = check_y(m, b, &flat);
  if (rc == 0)
    rc = layers_forward(m, b, training);
  if (rc != 0)
    return rc;
  double loss;
  rc = seq_loss_run(m->host, &m->loss, m->nn, m->layers[m->n_layers - 1].y,
                    flat.y.data, flat.size, m->classes, 1, NULL, &loss, out);
  if (rc != 0)
    return rc;
  out->has_loss = true;
  out->loss = loss;
  if (seq_loss_labels(&m->loss))
    model_scores_batch(&m->scores, m->layers[m->n_layers - 1].y, &flat,
                       !training, out);
  if (training)
    m->ready = b->size;
  return 0;
}

/* A context longer than the net's tokens, cropped to its last ones (as
 * gpt's, so that loopkit generate runs on): B into CROPPED, its tokens in
 * grad[0], which only a training step's backward uses. A shorter one is
 * refused: the net was built for its length. */
static int crop(seq *m, const lk_batch *b, lk_batch *cropped) {
  const lk_tensor *x = &b->x;
  size_t T = m->layers[0].in_numel;
  *cropped = *b;
  if (!m->tokens || !x->data || x->dtype != LK_I32 || x->ndim != 2 ||
      x->shape[0] != b->size || x->shape[1] == T)
    return 0; /* as it is: check_x says what is wrong */
  if (x->shape[1] < T)
    return lk_fail(m->host, LK_EINVAL,
                   "a context of %zu tokens: the net takes %zu (its "
                   "block_size, the data's); give at least that many",
                   x->shape[1], T);
  int rc = reserve(m, b->size);
  if (rc != 0)
    return rc;
  int32_t *ctx = (int32_t *)(void *)m->grad[0];
  for (size_t i = 0; i < b->size; i++)
    memcpy(ctx + i * T, (const int32_t *)x->data + (i + 1) * x->shape[1] - T,
           T * sizeof *ctx);
  cropped->x.shape[1] = T;
  cropped->x.numel = b->size * T;
  cropped->x.data = ctx;
  return 0;
}

/* The logits, f32 [B, classes], as in evaluation (running statistics, no
 * dropout); of a language model, the next token's after each context (the
 * last position's), as gpt's. */
static int predict_step(void *self, const lk_batch *batch, lk_tensor *out) {
  seq *m = self;
  lk_batch cropped, *b = &cropped;
  int rc = crop(m, batch, &cropped);
  if (rc == 0)
    rc = layers_forward(m, b, false);
  float *logits = m->layers[m->n_layers - 1].y;
  if (rc == 0 && m->lm) {
    size_t T = m->positions, V = m->classes;
    for (size_t i = 0; i < b->size; i++) /* grad[1] is spare outside a step */
      memcpy(m->grad[1] + i * V, logits + (i * T + T - 1) * V,
             V * sizeof *logits);
    logits = m->grad[1];
  }
  if (rc == 0)
    *out = model_output(seq_loss_labels(&m->loss) ? "logits" : "y", logits,
                        b->size, m->classes);
  return rc;
}

static int training_step(void *self, const lk_batch *b, lk_step_result *out) {
  return forward(self, b, out, true);
}

static int validation_step(void *self, const lk_batch *b, lk_step_result *out) {
  return forward(self, b, out, false);
}

static int evaluation_end(void *self, lk_split split,
                          const lk_step_result *mean, lk_step_result *out) {
  seq *m = self;
  (void)split;
  /* a language model's perplexity, as gpt's: exp of the split's mean loss
   * per token */
  if (m->lm && mean->has_loss)
    lk_result_metric(out, "ppl", exp(mean->loss));
  return model_scores_end(&m->scores, m->host, out);
}
static const lk_step_ops step_ops = {.training_step = training_step,
                                     .validation_step = validation_step,
                                     .predict_step = predict_step,
                                     .evaluation_end = evaluation_end};

/* From the logits the training step left back through every layer; the
 * first layer's input gradient is never needed. */
static int backward(void *self, const lk_batch *b, double scale) {
  seq *m = self;
  int rc = model_check_ready(m->host, m->ready, b->size);
  if (rc != 0)
    return rc;
  int n = (int)b->size;
  seq_layer *last = &m->layers[m->n_layers - 1];
  float *d = m->grad[0], *spare = m->grad[1];
  int rows = n * (int)m->positions;
  memset(d, 0, (size_t)rows * m->classes * sizeof *d);
  double loss;
  rc = seq_loss_run(m->host, &m->loss, m->nn, last->y, b->y.data, (size_t)rows,
                    m->classes, (float)scale, d, &loss, NULL);
  if (rc != 0)
    return rc;
  for (size_t i = m->n_layers; i-- > 0;) {
    seq_layer *l = &m->layers[i];
    if (l->s.kind == SEQ_FLATTEN || l->pooled_relu)
      continue; /* the same gradient, another shape; done by the pool */
    const float *x = i ? m->layers[i - 1].y : b->x.data;
    if (l->relu_after && l->grad_in) { /* the ReLU's backward first */
      size_t count = (size_t)n * l->out_numel;
      memset(spare, 0, count * sizeof *spare);
      if (lk_nn_relu_backward(m->nn, spare, d, l->y, count) != 0)
        return kit_failed(m, i - 1, &m->layers[i - 1]);
      float *t = d;
      d = spare;
      spare = t;
    }
    float *dinp = NULL;
    if (l->grad_in) {
      dinp = spare;
      memset(dinp, 0, (size_t)n * l->in_numel * sizeof *dinp);
    }
    if (layer_backward(m, l, dinp, d, x, n) != 0)
      return kit_failed(m, i, l);
    if (!dinp)
      break; /* no layer before has parameters */
    spare = d;
    d = dinp;
  }
  return 0;
}

/* ---- the two kinds of sequential.so -------------------------------------
 * An instance is the model or the scheduler (sequential_lr.c), as its
 * options say; the entries both have go to the one it is. */

static int create_either(lk_host *host, const lk_options *o, void **self) {
  bool lr = false;
  int rc = seqlr_choose(host, o, &lr);
  return rc ? rc : lr ? seqlr_create(host, o, self) : create(host, o, self);
}

static void destroy_either(void *self) {
  if (seqlr_is(self))
    seqlr_destroy(self);
  else
    destroy(self);
}

static int check_state_either(void *self) {
  return seqlr_is(self) ? seqlr_check_state(self) : check_state(self);
}

static const lk_option options[] = {
    {"layers", LK_OPT_STRING, "",
     "the model (required for it): the network, torch-like, on one line: "
     "e.g. conv2d(32, 3, padding=1), relu, maxpool2d(2), flatten, "
     "linear(10); layers conv2d, maxpool2d, avgpool2d, batchnorm2d, "
     "batchnorm1d, layernorm, relu, gelu, tanh, sigmoid, dropout, flatten, "
     "linear, embedding (see loopkit.ini(5))",
     NULL},
    {"block_size", LK_OPT_INT, "0",
     "the model: the length of the token sequences its first layer, an "
     "embedding, takes (the data's must be as long; text's block_size = "
     "auto takes it); 0: the data's",
     "[0, 1048576]"},
    {"init", LK_OPT_PATH, "",
     "initial parameters: a FILE.safetensors holding every parameter by "
     "name (0.weight, 0.bias, ...: a torch nn.Sequential's "
     "named_parameters(), F32 or F64), and batch norm's buffers (its "
     "state_dict(), read strictly) or none of them, or a raw "
     "little-endian f32 file of every parameter in order, each in torch's "
     "layout; empty: torch's init from the seed",
     NULL},
    SEQLR_OPTIONS,
    MODEL_SCORE_OPTIONS,
    SEQ_LOSS_OPTIONS, /* last: config.ini keeps the others' order */
    {NULL, 0, NULL, NULL, NULL}};

static const lk_backward_ops backward_ops = {.backward = backward};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_DESCRIPTOR(
        .name = "sequential",
        .summary =
            "a network of layers described in the config (conv2d, pools, "
            "norms, activations, dropout, linear) and its loss "
            "(cross-entropy, nll, bce, mse, l1, smooth_l1, huber); "
            "or schedulers one after the other, as torch's SequentialLR",
        .options = options, .create = create_either, .destroy = destroy_either,
        .step = &step_ops, .backward = &backward_ops,
        .scheduler = &seqlr_scheduler_ops, .check_state = check_state_either);

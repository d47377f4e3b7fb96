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
 * "3.bias"; in a block, a nested one's: "3.1.weight", graph.c); batch norm
 * keeps running_mean, running_var and num_batches_tracked as checkpointed state
 * under the same names. Initial values are torch's defaults (kaiming_uniform_(a
 * = sqrt(5)) for weights, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for biases; the
 * norms 1 and 0), drawn from the run's generator in parameter order, or read
 * from a file (a .safetensors by name, through lk_host_load_params, or raw
 * f32).
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

#include <loopkit/layer.h>
#include <loopkit/nn.h>

#include "bundled.h"
#include "graph.h"

static const char *kind_name(const seq_layer *l) {
  return l->l.type->name;
}

/* Whether layer L computes nothing of its own: a view (flatten) or a layer
 * whose work the next one does (a ReLU before a max-pool); its output is
 * its input then. */
static bool passes(const seq_layer *l) {
  return (l->l.type->flags & LK_LAYER_VIEW) || l->l.done_by_next;
}

static void free_buffers(seq *m) {
  for (size_t i = 0; m->layers && i < m->n_layers; i++) {
    if (!passes(&m->layers[i])) {
      free(m->layers[i].y);
      free(m->layers[i].g);
    }
    m->layers[i].y = m->layers[i].g = NULL;
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
    lk_layer_free(&m->layers[i].l);
  free(m->layers);
  free(m->text);
  for (size_t i = 0; i < m->n_texts; i++)
    free(m->texts[i]);
  free(m->texts);
  lk_nn_free(m->nn);
  model_scores_free(&m->scores);
  seq_loss_free(&m->loss);
  free(m);
}

/* ---- building the network from the data's sample shape ------------------ */

/* "layers: layer I (KIND): ..." with the shapes the layer gets; I is the
 * node's name ("3", "3.1"), KIND its type, and in a block or of a join its
 * text too. */
#define SHAPE_FAIL(host, i, l, fmt, ...)                                       \
  ((void)(i), lk_fail(host, LK_ECONFIG, "layers: layer %s (%s): " fmt,         \
                      (l)->name, (l)->desc, __VA_ARGS__))

/* The most values one sample of a layer's input or output may hold: the
 * kit's sizes are ints, and a batch multiplies them again. */
#define SEQ_MAX_NUMEL ((size_t)1 << 30)

/* The values of shape S into *OUT, through lk_size_mul; false when they
 * do not fit a size_t. */
static bool numel(const lk_layer_shape *s, size_t *out) {
  size_t t = 1;
  for (int i = 0; i < s->ndim; i++)
    if (s->d[i] < 0 || !lk_size_mul(t, (size_t)s->d[i], &t))
      return false;
  *out = t;
  return true;
}

/* The output shape of layer I from its N_IN input shapes IN, by its
 * table. */
static int infer(lk_host *host, size_t i, seq_layer *sl, int n_in,
                 const lk_layer_shape *in) {
  char a[64], b[64];
  size_t count = 0;
  lk_layer_shape_text(in, a, sizeof a);
  if (!numel(in, &count) || count > SEQ_MAX_NUMEL)
    return SHAPE_FAIL(host, i, sl,
                      "input %s: too large (%zu values a sample, more than "
                      "2^30)",
                      a, count);
  if (lk_layer_infer(&sl->l, n_in, in) != 0)
    return SHAPE_FAIL(host, i, sl, "%s", lk_last_error());
  if (!numel(&sl->l.out, &count) || count > SEQ_MAX_NUMEL)
    return SHAPE_FAIL(host, i, sl,
                      "input %s, output %s: too large (more than 2^30 "
                      "values)",
                      a, lk_layer_shape_text(&sl->l.out, b, sizeof b));
  return 0;
}

/* The parameters and buffers node SL's table declares, named as torch's
 * nn.Sequential names them ("3.weight"), then what it keeps. */
static int add_params(seq *m, seq_layer *sl) {
  lk_layer *l = &sl->l;
  lk_layer_tensor t[LK_LAYER_MAX_TENSORS];
  int n = l->type->tensors ? l->type->tensors(l, t) : 0;
  /* the layer itself, for loopkit summary: "3", its type, its output */
  size_t out[LK_MAX_DIMS];
  for (int d = 0; d < l->out.ndim; d++)
    out[d] = (size_t)l->out.d[d];
  int declared = lk_host_add_layer(m->host, sl->name, l->type->name,
                                   (size_t)l->out.ndim, out);
  if (declared != 0)
    return declared;
  for (int k = 0; k < n; k++) {
    char name[96];
    snprintf(name, sizeof name, "%s.%.31s", sl->name, t[k].name);
    size_t nd = (size_t)t[k].ndim;
    /* buffers go out and in by torch's names (lk_host_add_buffer) */
    int rc =
        t[k].flags & LK_LAYER_PARAM
            ? lk_host_add_param(m->host, name, t[k].dtype, nd, t[k].shape,
                                &l->t[k])
            : lk_host_add_buffer(
                  m->host, name, t[k].dtype, nd, t[k].shape,
                  t[k].flags & LK_LAYER_COUNT ? LK_BUFFER_COUNT : 0, &l->t[k]);
    if (rc != 0)
      return rc;
    l->n_t = k + 1;
  }
  if (lk_layer_bind(l) != 0)
    return lk_fail(m->host, LK_ENOMEM, "layer %s (%s): %s", sl->name,
                   kind_name(sl), lk_last_error());
  return 0;
}

/* torch's reset_parameters, layer by layer, from the run's generator in
 * parameter order (each table's init). */
static void torch_init(seq *m) {
  lk_rng *rng = lk_host_rng(m->host);
  for (size_t i = 0; i < m->n_layers; i++) {
    lk_layer *l = &m->layers[i].l;
    if (l->n_t && l->type->init)
      l->type->init(l, rng);
  }
}

/* A classifier's output (loss cross_entropy or nll): [classes], or of a
 * language model [T, V]. */
static int check_classes(seq *m, const lk_sample_shape *sh,
                         const lk_layer_shape *out) {
  lk_host *host = m->host;
  seq_layer *last = &m->layers[m->n_layers - 1];
  char a[64];
  int nd = out->ndim;
  lk_layer_shape_text(out, a, sizeof a);
  char y[96];
  if (sh->n_classes == 0)
    return lk_fail(host, LK_ECONFIG,
                   "the network classifies (loss = %s takes class labels, "
                   "i32), but the data's targets are not class labels: %s; "
                   "a regression loss (mse, l1, smooth_l1, huber) or "
                   "bce_with_logits takes f32 targets",
                   seq_loss_name(&m->loss), seq_loss_y_text(sh, y, sizeof y));
  m->positions = m->lm ? sh->x_shape[0] : 1;
  if (m->lm) {
    /* the next token at every position: [T, V] logits, V at least the
     * data's tokens (a vocabulary, as gpt's vocab_size) */
    if (nd != 2 || (size_t)out->d[0] != m->positions ||
        (size_t)out->d[1] < sh->n_classes)
      return SHAPE_FAIL(host, m->n_layers - 1, last,
                        "output %s, but the data's targets are the next "
                        "token at each of %zu positions, up to %zu: the last "
                        "layer must give [%zu, V] with V >= %zu",
                        a, m->positions, sh->n_classes - 1, m->positions,
                        sh->n_classes);
    m->classes = (size_t)out->d[1];
  } else if (nd != 1 || (size_t)out->d[0] != sh->n_classes)
    return SHAPE_FAIL(host, m->n_layers - 1, last,
                      "output %s, but the data has %zu classes: the last "
                      "layer must give [%zu]%s",
                      a, sh->n_classes, sh->n_classes,
                      nd != 1 ? " (a flatten before it?)" : "");
  else
    m->classes = sh->n_classes;
  return seq_loss_classes(host, &m->loss, m->classes);
  return 0;
}

/* The network for the data's samples: each layer's shape, then the
 * parameters. */
static int build(seq *m, const lk_sample_shape *sh) {
  lk_layer_shape shape = {.dtype = sh->x_dtype, .ndim = (int)sh->x_ndim};
  for (int d = 0; d < shape.ndim; d++)
    shape.d[d] = (int)sh->x_shape[d];
  /* a language model's targets are its tokens: their range is the data's */
  m->lm = m->tokens && sh->y_dtype == LK_I32 && sh->y_ndim == 1 &&
          sh->y_shape[0] == sh->x_shape[0];
  shape.tokens = m->lm ? sh->n_classes : 0;
  const lk_layer_shape data = shape;
  for (size_t i = 0; i < m->n_layers; i++) {
    seq_layer *sl = &m->layers[i];
    lk_layer_shape in[2];
    for (int k = 0; k < 2; k++)
      in[k] = sl->in[k] < 0 ? data : m->layers[sl->in[k]].l.out;
    int rc = infer(m->host, i, sl, sl->ref ? 2 : 1, in);
    if (rc != 0)
      return rc;
    shape = sl->l.out;
    if (sl->l.in_numel > m->max_numel)
      m->max_numel = sl->l.in_numel;
    if (sl->l.out_numel > m->max_numel)
      m->max_numel = sl->l.out_numel;
  }
  m->positions = 1;                  /* a language model's: check_classes */
  int rc = seq_loss_labels(&m->loss) /* else loss.c's f32 targets */
               ? check_classes(m, sh, &shape)
               : seq_loss_shape(m->host, &m->loss, sh, shape.d, shape.ndim,
                                &m->classes);
  bool params_before = false;
  seq_graph_link(m); /* the uses of each output: fusion needs one */
  for (size_t i = 0; rc == 0 && i < m->n_layers; i++) {
    seq_layer *sl = &m->layers[i], *prev = i ? &m->layers[i - 1] : NULL;
    rc = add_params(m, sl);
    sl->grad_in = params_before;
    params_before |= seq_has_params(&sl->l);
    /* a ReLU whose output another node takes too (marked) stays */
    if (prev && prev->uses == 1 && sl->in[0] == (int)i - 1 &&
        sl->l.type->fuse_prev && sl->l.type->fuse_prev(&sl->l, &prev->l))
      prev->l.done_by_next = true;
  }
  return rc;
}

/* Token samples (i32 [T], as text's) go into a layer that takes tokens
 * (embedding), the first, and nothing else takes them; BLOCK (the option
 * block_size), when not 0, is the length they must have: the model
 * declares its context, as gpt's block_size does, and text's block_size =
 * auto takes it. */
static int check_tokens(seq *m, const lk_sample_shape *sh, int64_t block) {
  char got[LK_MAX_DIMS * 22 + 8];
  model_sample_text(sh, got, sizeof got);
  m->tokens = sh->x_dtype == LK_I32 && sh->x_ndim == 1;
  if (m->tokens && !(m->layers[0].l.type->flags & LK_LAYER_TOKENS))
    return lk_fail(m->host, LK_ECONFIG,
                   "layers: the data's samples are tokens, %s: the first "
                   "layer must be embedding(num_embeddings, embedding_dim)",
                   got);
  for (size_t i = 0; i < m->n_layers; i++)
    if ((m->layers[i].l.type->flags & LK_LAYER_TOKENS) && (i > 0 || !m->tokens))
      return SHAPE_FAIL(m->host, i, &m->layers[i],
                        "takes tokens, i32 [T], as the first layer; %s%s%s",
                        i > 0 ? "it is not the first"
                              : "the data's samples are ",
                        i > 0 ? "" : got, i > 0 ? "" : ", not tokens");
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
  return 0;
}

/* The data's sample shape, which the network sizes itself from, or a
 * message: f32 of 1 to 3 dimensions, or tokens. */
static int data_shape(lk_host *host, lk_sample_shape *sh) {
  int rc = lk_host_data_shape(host, sh);
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
  model_sample_text(sh, got, sizeof got);
  if ((sh->x_dtype != LK_F32 || sh->x_ndim < 1 || sh->x_ndim > 3) &&
      (sh->x_dtype != LK_I32 || sh->x_ndim != 1))
    return lk_fail(host, LK_ECONFIG,
                   "the data's samples are %s; expected f32 with 1 to 3 "
                   "dimensions, or tokens i32 [T] for an embedding",
                   got);
  for (size_t i = 0; i < sh->x_ndim; i++)
    if (sh->x_shape[i] > (1u << 24))
      return lk_fail(host, LK_ECONFIG,
                     "the data's samples are %s: dimension %zu is %zu, more "
                     "than 2^24",
                     got, i, sh->x_shape[i]);
  return 0;
}

static int create(lk_host *host, const lk_options *o, void **self) {
  lk_sample_shape sh;
  int rc = data_shape(host, &sh);
  if (rc != 0)
    return rc;
  seq *m = calloc(1, sizeof *m);
  if (!m)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  m->host = host;
  rc = (m->text = strdup(lk_opt_string(o, "layers")))
           ? seq_graph_expand(m)
           : lk_fail(host, LK_ENOMEM, "out of memory");
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

/* The buffers a checkpoint restored, as their tables bound them (batch
 * norm's counts and variances). */
static int check_state(void *self) {
  seq *m = self;
  for (size_t i = 0; i < m->n_layers; i++) {
    lk_layer *l = &m->layers[i].l;
    lk_layer_tensor t[LK_LAYER_MAX_TENSORS];
    int n = l->type->tensors ? l->type->tensors(l, t) : 0;
    for (int k = 0; k < n && k < l->n_t; k++) {
      int rc = t[k].checked ? lk_state_check(m->host, l->t[k], t[k].min,
                                             t[k].max, t[k].integer)
                            : 0;
      if (rc != 0)
        return rc;
    }
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
    seq_layer *sl = &m->layers[i];
    /* a view's output and a fused layer's are their input (forward) */
    if (!passes(sl))
      ok = (sl->y = model_alloc(n, sl->l.out_numel)) && ok;
    ok = lk_layer_reserve(&sl->l, n) == 0 && ok;
  }
  for (int k = 0; k < 2; k++)
    ok = (m->grad[k] = model_alloc(n, m->max_numel)) && ok;
  for (size_t i = 0; m->graph && i < m->n_layers; i++) {
    seq_layer *sl = &m->layers[i]; /* a graph's: a gradient a node */
    if (!passes(sl))
      ok = (sl->g = model_alloc(n, sl->l.out_numel)) && ok;
    else
      sl->g = sl->in[0] >= 0 ? m->layers[sl->in[0]].g : NULL;
  }
  if (!ok) {
    free_buffers(m);
    return lk_fail(m->host, LK_ENOMEM, "out of memory for a batch of %zu", n);
  }
  m->cap = n;
  return 0;
}

/* ---- forward and backward, layer by layer ------------------------------- */

static int kit_failed(seq *m, size_t i, const seq_layer *l) {
  (void)i;
  return lk_fail(m->host, LK_EPLUGIN, "layer %s (%s): %s", l->name,
                 kind_name(l), lk_last_error());
}

/* x: f32 samples, or i32 [B, T] tokens. */
static int check_x(seq *m, const lk_batch *b) {
  const lk_tensor *x = &b->x;
  size_t T = m->layers[0].l.in_numel;
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
  lk_rng *rng = lk_host_rng(m->host);
  for (size_t i = 0; i < m->n_layers; i++) {
    seq_layer *sl = &m->layers[i];
    const float *in[2] = {seq_input(m, sl, 0, x),
                          sl->ref ? seq_input(m, sl, 1, x) : NULL};
    if (passes(sl)) { /* the same memory, another shape */
      sl->y = (float *)in[0];
      continue;
    }
    if (sl->l.type->forward(&sl->l, m->nn, sl->y, in, n, training, rng) != 0)
      return kit_failed(m, i, sl);
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
  size_t T = m->layers[0].l.in_numel;
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
                                     .evaluation_end = evaluation_end,
                                     .onnx = seq_onnx};

/* A graph's backward: every node's gradient zeroed, the loss's into the
 * last's, then each node from the last adds into its inputs' (a tensor
 * several nodes take gets all of theirs). */
static int backward_graph(seq *m, const lk_batch *b, double scale) {
  int n = (int)b->size;
  for (size_t i = 0; i < m->n_layers; i++)
    if (!passes(&m->layers[i]) && m->layers[i].g)
      memset(m->layers[i].g, 0,
             (size_t)n * m->layers[i].l.out_numel * sizeof(float));
  seq_layer *last = &m->layers[m->n_layers - 1];
  int rows = n * (int)m->positions;
  double loss;
  int rc =
      seq_loss_run(m->host, &m->loss, m->nn, last->y, b->y.data, (size_t)rows,
                   m->classes, (float)scale, last->g, &loss, NULL);
  for (size_t i = m->n_layers; rc == 0 && i-- > 0;) {
    seq_layer *sl = &m->layers[i];
    if (passes(sl) || !sl->need)
      continue; /* a view's or fused layer's gradient is its input's */
    const float *x[2] = {seq_input(m, sl, 0, b->x.data),
                         sl->ref ? seq_input(m, sl, 1, b->x.data) : NULL};
    float *dx[2] = {NULL, NULL};
    for (int k = 0; k < (sl->ref ? 2 : 1); k++)
      if (sl->in[k] >= 0 && m->layers[sl->in[k]].need)
        dx[k] = m->layers[sl->in[k]].g;
    if (sl->l.type->backward(&sl->l, m->nn, dx, sl->g, x, sl->y, n) != 0)
      return kit_failed(m, i, sl);
  }
  return rc;
}

/* From the logits the training step left back through every layer; the
 * first layer's input gradient is never needed. */
static int backward(void *self, const lk_batch *b, double scale) {
  seq *m = self;
  int rc = model_check_ready(m->host, m->ready, b->size);
  if (rc != 0)
    return rc;
  if (m->graph)
    return backward_graph(m, b, scale);
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
    seq_layer *sl = &m->layers[i];
    if (passes(sl))
      continue; /* the same gradient, another shape; done by the next */
    const float *x[1] = {i ? m->layers[i - 1].y : b->x.data};
    float *dinp[1] = {NULL};
    if (sl->grad_in) {
      dinp[0] = spare;
      memset(spare, 0, (size_t)n * sl->l.in_numel * sizeof *spare);
    }
    if (sl->l.type->backward(&sl->l, m->nn, dinp, d, x, sl->y, n) != 0)
      return kit_failed(m, i, sl);
    if (!dinp[0])
      break; /* no layer before has parameters */
    spare = d;
    d = dinp[0];
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
     "linear, embedding, silu, leakyrelu, elu, softplus, mish, hardswish, "
     "hardsigmoid, softmax(dim), logsoftmax(dim), identity, "
     "lstm(hidden_size), gru(hidden_size) (on sequences [T, C]: npy data "
     "[N, T, C], or an embedding's output), last (the last step), conv1d, "
     "maxpool1d, avgpool1d, "
     "adaptiveavgpool1d, adaptiveavgpool2d; branches: "
     "@NAME "
     "marks the current tensor, "
     "add(@NAME) and cat(@NAME) join it, a section's name inserts its own "
     "layers list as a block (see loopkit.ini(5))",
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

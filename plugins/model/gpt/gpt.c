/* gpt: nanoGPT's GPT-2, a decoder-only transformer language model, written
 * with loopkit's layer kit (loopkit/nn.h) as llm.c writes it by hand.
 *
 *   x [B, T] tokens -> wte + wpe -> dropout -> n_layer blocks -> ln_f
 *     -> logits [B, T, V] = ln_f(x) wte^T (the head is tied to wte)
 *   block: x += dropout(c_proj(attention(c_attn(ln_1(x)))))
 *          x += dropout(mlp.c_proj(gelu(mlp.c_fc(ln_2(x)))))
 *   loss = the mean cross-entropy over all B x T positions
 *
 * Pre-LayerNorm blocks, causal multi-head attention, a 4x MLP with the
 * tanh GELU (GPT-2's and llm.c's; nanoGPT's nn.GELU() is the erf one),
 * learned position embeddings, a final LayerNorm. Dropout, drawn from the
 * host's generator, is applied where nanoGPT applies transformer.drop and
 * resid_dropout; nanoGPT's attn_dropout, on the attention probabilities,
 * is not (the kit's attention has none).
 *
 * Parameters are named and shaped as nanoGPT's state_dict (nn.Linear's
 * weights are [out, in]); lm_head.weight is transformer.wte.weight and is
 * not a parameter of its own. Init as nanoGPT's _init_weights, from the
 * host's generator in parameter order: N(0, 0.02) for the embeddings and
 * every linear weight, N(0, 0.02 / sqrt(2 n_layer)) for the two residual
 * projections (c_proj), biases 0, LayerNorm weights 1; or, with init, a
 * safetensors file of them (a torch state_dict saved with safetensors:
 * its lm_head.weight is ignored), and then nothing is drawn.
 *
 * Batches: x and y i32 [B, T] with T <= block_size (the text data
 * plugin's), y the next token at every position. predict_step (ABI 1.4)
 * takes contexts x [B, T] of any length, cropped to their last block_size
 * tokens, and gives the logits of the next token, f32 [B, V], for loopkit
 * generate. Its onnx entry (ABI 1.7, onnx.c) exports the forward as
 * an ONNX model: tokens [N, T] to the logits at every position.
 *
 * Memory: every activation backward needs is kept, per layer (llm.c's
 * ActivationTensors), in one block sized at the first batch for its B x T
 * rows and reused by every later batch (it grows only for a larger one);
 * nothing is allocated on the way of a step. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>
#include <loopkit/nn.h>

#include "bundled.h"
#include "onnx.h"
#include "model_common.h"

/* One block's parameters, in nanoGPT's order; the biases are NULL without
 * bias. */
typedef struct block {
  lk_tensor *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb;
  lk_tensor *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
} block;

/* One block's activations: what backward needs, for N = B x T rows. */
typedef struct layer_acts {
  float *ln1, *ln1_mean, *ln1_rstd; /* [N, C], [N], [N] */
  float *qkv;                       /* [N, 3C] */
  float *att;                       /* [B, NH, T, T] */
  float *atty;                      /* [N, C] attention output */
  uint8_t *attmask;                 /* [N, C] resid_dropout's */
  float *res2;                      /* [N, C] x after the attention */
  float *ln2, *ln2_mean, *ln2_rstd;
  float *fch, *fchg; /* [N, 4C] c_fc's output, and its GELU */
  uint8_t *fcmask;   /* [N, C] */
  float *res3;       /* [N, C] x after the MLP: the next block's input */
} layer_acts;

typedef struct gpt {
  lk_host *host;
  lk_nn *nn;
  int L, NH, C, maxT, V; /* n_layer, n_head, n_embd, block_size, vocab */
  float dropout;
  bool bias;
  lk_tensor *wte, *wpe, *lnfw, *lnfb;
  block *blocks;

  /* activations, for up to cap rows (B x T) */
  size_t cap;
  void *mem;        /* one allocation, everything below points into it */
  int32_t *pos;     /* [N] position of each row, for wpe */
  int32_t *ctx;     /* [N] predict's contexts, cropped */
  float *enc;       /* [N, C] embeddings: the first block's input */
  uint8_t *encmask; /* [N, C] transformer.drop's */
  layer_acts *acts; /* [L] */
  float *proj;      /* [N, C] a projection before its dropout and sum */
  float *lnf, *lnf_mean, *lnf_rstd, *logits; /* logits [N, V] */
  /* backward's gradients of activations */
  float *dres, *dln, *dproj, *datty, *dqkv, *dfchg, *dfch, *dlogits;
  float *last, *last_logits; /* predict: [B, C] and [B, V] */

  int B, T;   /* of the batch the activations are of */
  bool ready; /* they are a training step's, and dlogits is for scale 1 */
} gpt;

#define NN(m, call)                                                            \
  do {                                                                         \
    int rc_ = (call);                                                          \
    if (rc_ != 0)                                                              \
      return lk_fail((m)->host, rc_, "%s", lk_last_error());                   \
  } while (0)

static void destroy(void *self) {
  gpt *m = self;
  if (!m)
    return;
  lk_nn_free(m->nn);
  free(m->mem);
  free(m->acts);
  free(m->blocks);
  free(m);
}

/* ---- memory ------------------------------------------------------------- */

/* Carves the block at BASE (NULL: only counts) into the buffers for N rows,
 * each 64-byte aligned; returns the bytes used. */
static size_t carve(gpt *m, char *base, size_t N) {
  size_t at = 0, C = (size_t)m->C, V = (size_t)m->V;
  size_t att = N * (size_t)m->NH * (size_t)m->maxT; /* >= B NH T T */
  bool drop = m->dropout > 0;
#define TAKE(ptr, count, type)                                                 \
  do {                                                                         \
    size_t bytes_ = ((count) * sizeof(type) + 63) / 64 * 64;                   \
    if (base)                                                                  \
      (ptr) = (type *)(void *)(base + at);                                     \
    at += bytes_;                                                              \
  } while (0)
  TAKE(m->pos, N, int32_t);
  TAKE(m->ctx, N, int32_t);
  TAKE(m->enc, N * C, float);
  if (drop)
    TAKE(m->encmask, N * C, uint8_t);
  for (int l = 0; l < m->L; l++) {
    layer_acts *a = &m->acts[l];
    TAKE(a->ln1, N * C, float);
    TAKE(a->ln1_mean, N, float);
    TAKE(a->ln1_rstd, N, float);
    TAKE(a->qkv, N * 3 * C, float);
    TAKE(a->att, att, float);
    TAKE(a->atty, N * C, float);
    TAKE(a->res2, N * C, float);
    TAKE(a->ln2, N * C, float);
    TAKE(a->ln2_mean, N, float);
    TAKE(a->ln2_rstd, N, float);
    TAKE(a->fch, N * 4 * C, float);
    TAKE(a->fchg, N * 4 * C, float);
    TAKE(a->res3, N * C, float);
    if (drop) {
      TAKE(a->attmask, N * C, uint8_t);
      TAKE(a->fcmask, N * C, uint8_t);
    }
  }
  TAKE(m->proj, N * C, float);
  TAKE(m->lnf, N * C, float);
  TAKE(m->lnf_mean, N, float);
  TAKE(m->lnf_rstd, N, float);
  TAKE(m->logits, N * V, float);
  TAKE(m->dres, N * C, float);
  TAKE(m->dln, N * C, float);
  TAKE(m->dproj, N * C, float);
  TAKE(m->datty, N * C, float);
  TAKE(m->dqkv, N * 3 * C, float);
  TAKE(m->dfchg, N * 4 * C, float);
  TAKE(m->dfch, N * 4 * C, float);
  TAKE(m->dlogits, N * V, float);
  TAKE(m->last, N * C, float);
  TAKE(m->last_logits, N * V, float);
#undef TAKE
  return at;
}

/* The most rows (B x T positions) a batch may have: the kit's sizes are
 * ints, and the widest array of the activations, a row's fc or logits or
 * attention probabilities times the rows, must fit one. */
static size_t max_rows(const gpt *m) {
  size_t widest = (size_t)(4 * m->C > m->V ? 4 * m->C : m->V),
         att = (size_t)m->NH * (size_t)m->maxT; /* <= 2^28: no wrap */
  return (size_t)INT_MAX / (widest > att ? widest : att);
}

/* Room for N rows (B x T); the block only grows. */
static int reserve(gpt *m, size_t N) {
  if (N <= m->cap)
    return 0;
  if (N > max_rows(m))
    return lk_fail(m->host, LK_EINVAL,
                   "a batch of %zu positions is too large for n_embd = %d, "
                   "vocab_size = %d, n_head = %d and block_size = %d: at "
                   "most %zu",
                   N, m->C, m->V, m->NH, m->maxT, max_rows(m));
  size_t bytes = carve(m, NULL, N);
  void *mem = aligned_alloc(64, bytes);
  if (!mem)
    return lk_fail(m->host, LK_ENOMEM,
                   "out of memory for the activations of %zu positions (%zu "
                   "bytes)",
                   N, bytes);
  free(m->mem);
  m->mem = mem;
  m->cap = N;
  carve(m, mem, N);
  m->T = 0; /* pos must be refilled */
  return 0;
}

/* ---- parameters --------------------------------------------------------- */

static int add(gpt *m, const char *name, size_t d0, size_t d1,
               lk_tensor **out) {
  size_t shape[2] = {d0, d1};
  return lk_host_add_param(m->host, name, LK_F32, d1 ? 2 : 1, shape, out);
}

/* PREFIX.PART.weight [out, in] and, with bias, PREFIX.PART.bias [out]; a
 * layernorm's (IN 0) are [C]. */
static int add_part(gpt *m, const char *prefix, const char *part, size_t in,
                    size_t out, lk_tensor **w, lk_tensor **b) {
  char name[128];
  snprintf(name, sizeof name, "%s.%s.weight", prefix, part);
  int rc = add(m, name, out, in, w);
  snprintf(name, sizeof name, "%s.%s.bias", prefix, part);
  return rc || !m->bias ? rc : add(m, name, out, 0, b);
}

/* The layers of the forward, for loopkit summary: PREFIX.PART of TYPE,
 * its output [block_size, WIDTH] for a sample of block_size tokens. */
static int declare(gpt *m, const char *prefix, const char *part,
                   const char *type, size_t width) {
  char name[128];
  size_t out[2] = {(size_t)m->maxT, width};
  snprintf(name, sizeof name, "%s%s%s", prefix, *part ? "." : "", part);
  return lk_host_add_layer(m->host, name, type, 2, out);
}

/* Block P's parameters and layers, in the order of its forward. */
static int add_block(gpt *m, block *k, const char *p) {
  size_t C = (size_t)m->C;
  int rc = add_part(m, p, "ln_1", 0, C, &k->ln1w, &k->ln1b);
  rc = rc ? rc : declare(m, p, "ln_1", "layernorm", C);
  if (rc == 0)
    rc = add_part(m, p, "attn.c_attn", C, 3 * C, &k->qkvw, &k->qkvb);
  rc = rc ? rc : declare(m, p, "attn.c_attn", "linear", 3 * C);
  rc = rc ? rc : declare(m, p, "attn", "causalselfattention", C);
  if (rc == 0)
    rc = add_part(m, p, "attn.c_proj", C, C, &k->attprojw, &k->attprojb);
  rc = rc ? rc : declare(m, p, "attn.c_proj", "linear", C);
  if (rc == 0)
    rc = add_part(m, p, "ln_2", 0, C, &k->ln2w, &k->ln2b);
  rc = rc ? rc : declare(m, p, "ln_2", "layernorm", C);
  if (rc == 0)
    rc = add_part(m, p, "mlp.c_fc", C, 4 * C, &k->fcw, &k->fcb);
  rc = rc ? rc : declare(m, p, "mlp.c_fc", "linear", 4 * C);
  rc = rc ? rc : declare(m, p, "mlp.gelu", "gelu", 4 * C);
  if (rc == 0)
    rc = add_part(m, p, "mlp.c_proj", 4 * C, C, &k->fcprojw, &k->fcprojb);
  return rc ? rc : declare(m, p, "mlp.c_proj", "linear", C);
}

static int add_params(gpt *m) {
  size_t C = (size_t)m->C;
  int rc = add(m, "transformer.wte.weight", (size_t)m->V, C, &m->wte);
  rc = rc ? rc : declare(m, "transformer.wte", "", "embedding", C);
  if (rc == 0)
    rc = add(m, "transformer.wpe.weight", (size_t)m->maxT, C, &m->wpe);
  rc = rc ? rc : declare(m, "transformer.wpe", "", "embedding", C);
  for (int l = 0; l < m->L && rc == 0; l++) {
    char p[64];
    snprintf(p, sizeof p, "transformer.h.%d", l);
    rc = add_block(m, &m->blocks[l], p);
  }
  if (rc == 0)
    rc = add_part(m, "transformer", "ln_f", 0, C, &m->lnfw, &m->lnfb);
  rc = rc ? rc : declare(m, "transformer", "ln_f", "layernorm", C);
  /* the head is wte, tied: a layer with no parameters of its own */
  return rc ? rc : declare(m, "lm_head", "", "linear", (size_t)m->V);
}

static void normal(lk_rng *rng, lk_tensor *t, double std) {
  float *w = t->data;
  for (size_t i = 0; i < t->numel; i++)
    w[i] = (float)(std * lk_rng_normal(rng));
}

static void ones(lk_tensor *t) {
  float *w = t->data;
  for (size_t i = 0; i < t->numel; i++)
    w[i] = 1;
}

/* nanoGPT's _init_weights and its scaled c_proj, in parameter order (the
 * biases stay as the host made them: zeros). */
static void init_params(gpt *m) {
  lk_rng *rng = lk_host_rng(m->host);
  double std = 0.02, proj = 0.02 / sqrt(2.0 * m->L);
  normal(rng, m->wte, std);
  normal(rng, m->wpe, std);
  for (int l = 0; l < m->L; l++) {
    block *k = &m->blocks[l];
    ones(k->ln1w);
    normal(rng, k->qkvw, std);
    normal(rng, k->attprojw, proj);
    ones(k->ln2w);
    normal(rng, k->fcw, std);
    normal(rng, k->fcprojw, proj);
  }
  ones(m->lnfw);
}

/* ---- create ------------------------------------------------------------- */

/* The data's samples, when it says what they are: token sequences no
 * longer than block_size, of tokens below vocab_size. */
static int check_data(gpt *m) {
  lk_sample_shape s;
  int rc = lk_host_data_shape(m->host, &s);
  if (rc == LK_ENOTFOUND)
    return 0; /* no data, or it does not say: checked at every batch */
  if (rc != 0)
    return lk_fail(m->host, rc, "%s", lk_last_error());
  if (s.x_dtype != LK_I32 || s.x_ndim != 1 || s.y_dtype != LK_I32 ||
      s.y_ndim != 1 || s.y_shape[0] != s.x_shape[0])
    return lk_fail(m->host, LK_ECONFIG,
                   "the data's samples are not token sequences with the next "
                   "token at each position (x and y i32 [T]), as the text "
                   "plugin's are");
  if (s.x_shape[0] > (size_t)m->maxT)
    return lk_fail(m->host, LK_ECONFIG,
                   "block_size = %d, but the data's samples are %zu tokens "
                   "long (the data's block_size): the model has positions "
                   "for %d",
                   m->maxT, s.x_shape[0], m->maxT);
  if (s.n_classes > (size_t)m->V)
    return lk_fail(m->host, LK_ECONFIG,
                   "vocab_size = %d, but the data's tokens go up to %zu", m->V,
                   s.n_classes - 1);
  /* The batches, when the data says how large: what the first step would
   * refuse (reserve) is refused now, before a run directory is made. */
  size_t B, N = 0;
  const char *where;
  if (lk_host_data_batch_size(m->host, &B, &where) != 0)
    return 0;
  if (!lk_size_mul(B, s.x_shape[0], &N) || N > max_rows(m))
    return lk_fail(m->host, LK_ECONFIG,
                   "the data's batch_size = %zu (%s) is too large: batches "
                   "of %zu samples of %zu tokens, and with n_embd = %d, "
                   "vocab_size = %d, n_head = %d and block_size = %d the "
                   "activations hold at most %zu positions (batch_size %zu; "
                   "the layer kit's sizes are ints)",
                   B, where ? where : "?", B, s.x_shape[0], m->C, m->V, m->NH,
                   m->maxT, max_rows(m), max_rows(m) / s.x_shape[0]);
  return 0;
}

static int create(lk_host *host, const lk_options *o, void **self) {
  gpt *m = calloc(1, sizeof *m);
  if (!m)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  m->host = host;
  m->L = (int)lk_opt_int(o, "n_layer");
  m->NH = (int)lk_opt_int(o, "n_head");
  m->C = (int)lk_opt_int(o, "n_embd");
  m->maxT = (int)lk_opt_int(o, "block_size");
  m->V = (int)lk_opt_int(o, "vocab_size");
  m->dropout = (float)lk_opt_double(o, "dropout");
  m->bias = lk_opt_bool(o, "bias");
  int rc = 0;
  if (m->C % m->NH != 0)
    rc = lk_fail(host, LK_ECONFIG,
                 "n_embd = %d is not a multiple of n_head = %d: each head "
                 "takes n_embd / n_head channels",
                 m->C, m->NH);
  if (rc == 0)
    rc = check_data(m);
  if (rc == 0 && (!(m->blocks = calloc((size_t)m->L, sizeof *m->blocks)) ||
                  !(m->acts = calloc((size_t)m->L, sizeof *m->acts))))
    rc = lk_fail(host, LK_ENOMEM, "out of memory");
  if (rc == 0 && (rc = lk_nn_create(&m->nn, lk_host_threads(host), 0)) != 0)
    rc = lk_fail(host, rc, "%s", lk_last_error());
  if (rc == 0)
    rc = add_params(m);
  /* torch saves the tied head twice, as lm_head.weight too */
  static const char *const tied[] = {"lm_head.weight", NULL};
  const char *init = lk_opt_string(o, "init");
  if (rc == 0 && init[0])
    rc = lk_host_load_params(host, init, tied);
  else if (rc == 0)
    init_params(m);
  if (rc != 0) {
    destroy(m);
    return rc;
  }
  *self = m;
  return 0;
}

/* ---- batches ------------------------------------------------------------ */

/* Tokens T of [B, T] (NAME) in [0, V). */
static int check_tokens(gpt *m, const char *name, const lk_tensor *t) {
  const int32_t *v = t->data;
  size_t T = t->shape[1];
  for (size_t i = 0; i < t->shape[0] * T; i++) /* the shape's, not numel */
    if (v[i] < 0 || v[i] >= m->V)
      return lk_fail(m->host, LK_EINVAL,
                     "%s: token %d at [%zu, %zu] is out of range: vocab_size "
                     "= %d (0 to %d)",
                     name, (int)v[i], i / T, i % T, m->V, m->V - 1);
  return 0;
}

/* x (and y, with TARGETS) i32 [B, T], 1 <= T <= block_size; the rows
 * reserved and the positions filled. */
static int take_batch(gpt *m, const lk_batch *b, bool targets) {
  const lk_tensor *x = &b->x, *y = &b->y;
  char got[64], want[64];
  if (!x->data || x->dtype != LK_I32 || x->ndim != 2 || x->shape[0] < 1 ||
      x->shape[1] < 1 || x->shape[1] > (size_t)m->maxT ||
      x->shape[0] != b->size)
    return lk_fail(m->host, LK_EINVAL,
                   "x: expected i32 [B, T] tokens with 1 <= T <= block_size "
                   "= %d, got %s (is [plugins] data = text?)",
                   m->maxT,
                   x->data ? model_shape(x, got, sizeof got) : "no batch");
  if (targets && (!y->data || y->dtype != LK_I32 || y->ndim != 2 ||
                  y->shape[0] != x->shape[0] || y->shape[1] != x->shape[1]))
    return lk_fail(m->host, LK_EINVAL,
                   "y: expected the next tokens, %s like x, got %s",
                   model_shape(x, want, sizeof want),
                   y->data ? model_shape(y, got, sizeof got) : "none");
  int rc = check_tokens(m, "x", x);
  if (rc == 0 && targets)
    rc = check_tokens(m, "y", y);
  size_t B = x->shape[0], T = x->shape[1], N = 0;
  if (rc == 0 && !lk_size_mul(B, T, &N))
    rc = lk_fail(m->host, LK_EINVAL, "a batch of %zu x %zu is too large", B, T);
  if (rc == 0)
    rc = reserve(m, N);
  if (rc != 0)
    return rc;
  if ((int)T != m->T) {
    for (size_t i = 0; i < m->cap; i++)
      m->pos[i] = (int32_t)(i % T);
  }
  m->B = (int)B;
  m->T = (int)T;
  return 0;
}

/* ---- forward ------------------------------------------------------------ */

#define DATA(t) ((t) ? (const float *)(t)->data : NULL)

/* The dropout of a training forward, in place (nothing without dropout
 * or outside training: no draw either). */
static int drop(gpt *m, float *x, uint8_t *mask, size_t n, bool training) {
  if (!training || m->dropout == 0)
    return 0;
  NN(m, lk_nn_dropout_forward(m->nn, x, mask, x, n, m->dropout, true,
                              lk_host_rng(m->host)));
  return 0;
}

/* Everything up to ln_f, for the batch take_batch took: what every entry
 * shares. */
static int trunk(gpt *m, const int32_t *x, bool training) {
  lk_nn *nn = m->nn;
  int B = m->B, T = m->T, C = m->C, NH = m->NH, N = B * T;
  size_t NC = (size_t)N * (size_t)C;
  NN(m, lk_nn_embedding_forward(nn, m->enc, x, m->wte->data, N, m->V, C));
  NN(m,
     lk_nn_embedding_forward(nn, m->proj, m->pos, m->wpe->data, N, m->maxT, C));
  NN(m, lk_nn_residual_forward(nn, m->enc, m->enc, m->proj, NC));
  int rc = drop(m, m->enc, m->encmask, NC, training);
  const float *res = m->enc;
  for (int l = 0; l < m->L && rc == 0; l++) {
    const block *k = &m->blocks[l];
    layer_acts *a = &m->acts[l];
    NN(m, lk_nn_layernorm_forward(nn, a->ln1, a->ln1_mean, a->ln1_rstd, res,
                                  k->ln1w->data, DATA(k->ln1b), N, C, 1e-5f));
    NN(m, lk_nn_linear_forward(nn, a->qkv, a->ln1, k->qkvw->data, DATA(k->qkvb),
                               N, C, 3 * C));
    NN(m, lk_nn_attention_forward(nn, a->atty, a->att, a->qkv, B, T, C, NH));
    NN(m, lk_nn_linear_forward(nn, m->proj, a->atty, k->attprojw->data,
                               DATA(k->attprojb), N, C, C));
    if ((rc = drop(m, m->proj, a->attmask, NC, training)) != 0)
      break;
    NN(m, lk_nn_residual_forward(nn, a->res2, res, m->proj, NC));
    NN(m, lk_nn_layernorm_forward(nn, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2,
                                  k->ln2w->data, DATA(k->ln2b), N, C, 1e-5f));
    NN(m, lk_nn_linear_forward(nn, a->fch, a->ln2, k->fcw->data, DATA(k->fcb),
                               N, C, 4 * C));
    NN(m, lk_nn_gelu_forward(nn, a->fchg, a->fch, 4 * NC));
    NN(m, lk_nn_linear_forward(nn, m->proj, a->fchg, k->fcprojw->data,
                               DATA(k->fcprojb), N, 4 * C, C));
    if ((rc = drop(m, m->proj, a->fcmask, NC, training)) != 0)
      break;
    NN(m, lk_nn_residual_forward(nn, a->res3, a->res2, m->proj, NC));
    res = a->res3;
  }
  if (rc == 0)
    NN(m, lk_nn_layernorm_forward(nn, m->lnf, m->lnf_mean, m->lnf_rstd, res,
                                  m->lnfw->data, DATA(m->lnfb), N, C, 1e-5f));
  return rc;
}

/* The loss of batch B; a training step keeps d(loss)/d(logits) too. */
static int forward(gpt *m, const lk_batch *b, lk_step_result *out,
                   bool training) {
  m->ready = false;
  int rc = take_batch(m, b, true);
  if (rc == 0)
    rc = trunk(m, b->x.data, training);
  if (rc != 0)
    return rc;
  int N = m->B * m->T;
  NN(m, lk_nn_linear_forward(m->nn, m->logits, m->lnf, m->wte->data, NULL, N,
                             m->C, m->V));
  double loss;
  float *d = NULL;
  if (training) {
    d = m->dlogits;
    memset(d, 0, (size_t)N * (size_t)m->V * sizeof *d);
  }
  NN(m, lk_nn_crossentropy(m->nn, &loss, d, m->logits, b->y.data, N, m->V, 1,
                           NULL));
  out->has_loss = true;
  out->loss = loss;
  m->ready = training;
  return 0;
}

static int training_step(void *self, const lk_batch *b, lk_step_result *out) {
  return forward(self, b, out, true);
}

static int validation_step(void *self, const lk_batch *b, lk_step_result *out) {
  return forward(self, b, out, false);
}

/* Perplexity, exp of the split's mean loss (per token: every window has
 * the same length): val_ppl beside val_loss. Not the mean of the batches'
 * perplexities, which is larger. */
static int evaluation_end(void *self, lk_split split,
                          const lk_step_result *mean, lk_step_result *out) {
  (void)self;
  (void)split;
  if (mean->has_loss)
    lk_result_metric(out, "ppl", exp(mean->loss));
  return 0;
}

/* A context longer than block_size, cropped to its last block_size
 * tokens (nanoGPT's generate crops it so): B into CROP, a batch of CTX. */
static int crop(gpt *m, const lk_batch *b, lk_batch *cropped) {
  const lk_tensor *x = &b->x;
  *cropped = *b;
  if (!x->data || x->dtype != LK_I32 || x->ndim != 2 ||
      x->shape[1] <= (size_t)m->maxT)
    return 0; /* as it is: take_batch checks it */
  size_t B = x->shape[0], T = x->shape[1], keep = (size_t)m->maxT, N;
  if (!lk_size_mul(B, keep, &N))
    return lk_fail(m->host, LK_EINVAL, "a batch of %zu contexts is too large",
                   B);
  int rc = reserve(m, N);
  if (rc != 0)
    return rc;
  for (size_t i = 0; i < B; i++)
    memcpy(m->ctx + i * keep, (const int32_t *)x->data + i * T + (T - keep),
           keep * sizeof *m->ctx);
  cropped->x.shape[1] = keep;
  cropped->x.numel = B * keep;
  cropped->x.data = m->ctx;
  return 0;
}

/* The next token's logits after each context: ln_f's last row of each
 * sequence through the head. */
static int predict_step(void *self, const lk_batch *batch, lk_tensor *out) {
  gpt *m = self;
  m->ready = false;
  lk_batch cropped, *b = &cropped;
  int rc = crop(m, batch, &cropped);
  if (rc == 0)
    rc = take_batch(m, b, false);
  if (rc == 0)
    rc = trunk(m, b->x.data, false);
  if (rc != 0)
    return rc;
  size_t C = (size_t)m->C;
  for (int i = 0; i < m->B; i++)
    memcpy(m->last + (size_t)i * C,
           m->lnf + ((size_t)i * (size_t)m->T + (size_t)m->T - 1) * C,
           C * sizeof(float));
  NN(m, lk_nn_linear_forward(m->nn, m->last_logits, m->last, m->wte->data, NULL,
                             m->B, m->C, m->V));
  *out = (lk_tensor){.name = "logits",
                     .dtype = LK_F32,
                     .ndim = 2,
                     .shape = {(size_t)m->B, (size_t)m->V},
                     .numel = (size_t)m->B * (size_t)m->V,
                     .data = m->last_logits};
  return 0;
}

/* ---- backward ----------------------------------------------------------- */

#define GRAD(t) ((t) ? (float *)(t)->grad : NULL)

static void zero(float *p, size_t n) {
  memset(p, 0, n * sizeof *p);
}

/* A linear layer's backward whose input gradient DINP [N, C] is only
 * this layer's: DINP = DOUT weight, written by a product with beta = 0
 * (the BLAS writes each tile of C without reading it, in cache)
 * instead of cleared in a pass of its own and added into (the kit's
 * backward adds into dinp). Measured with perf on one thread: the
 * plugin's clearing passes fell from 2.3% of a baby-GPT step to 0.8%
 * (dfch, dqkv and dres still need theirs), OpenBLAS's own clearing of
 * each tile taking 0.6% (measured with OpenBLAS). The same products, tiles and
 * bits. Then the weight's and bias's gradients, added into. */
static int linear_backward(gpt *m, float *dinp, lk_tensor *w, lk_tensor *b,
                           const float *dout, const float *inp, int N, int C,
                           int OC) {
  NN(m, lk_nn_sgemm(m->nn, false, false, N, C, OC, 1, dout, OC, w->data, C, 0,
                    dinp, C));
  NN(m, lk_nn_linear_backward(m->nn, NULL, w->grad, GRAD(b), dout, inp, w->data,
                              N, C, OC));
  return 0;
}

/* The gradient of a dropped-out projection from the sum it went into:
 * DRES through the mask, or DRES itself without dropout. */
static int undrop(gpt *m, const uint8_t *mask, size_t n, const float **d) {
  if (m->dropout == 0) {
    *d = m->dres;
    return 0;
  }
  zero(m->dproj, n);
  NN(m, lk_nn_dropout_backward(m->nn, m->dproj, m->dres, mask, n, m->dropout,
                               true));
  *d = m->dproj;
  return 0;
}

/* Adds scale * d(loss)/d(param) into every gradient, from the head down,
 * each layer's backward after its forward's order reversed. */
static int backward(void *self, const lk_batch *b, double scale) {
  gpt *m = self;
  if (!m->ready || (size_t)m->B != b->size || b->x.ndim != 2 ||
      b->x.shape[1] != (size_t)m->T)
    return lk_fail(m->host, LK_ESTATE,
                   "backward without a training step on this batch");
  lk_nn *nn = m->nn;
  int B = m->B, T = m->T, C = m->C, NH = m->NH, N = B * T, V = m->V;
  size_t NC = (size_t)N * (size_t)C;
  if (scale != 1) { /* the training step kept the gradient of scale 1 */
    double loss;
    zero(m->dlogits, (size_t)N * (size_t)V);
    NN(m, lk_nn_crossentropy(nn, &loss, m->dlogits, m->logits, b->y.data, N, V,
                             (float)scale, NULL));
  }
  int rc =
      linear_backward(m, m->dln, m->wte, NULL, m->dlogits, m->lnf, N, C, V);
  if (rc != 0)
    return rc;
  zero(m->dres, NC);
  const float *top = m->acts[m->L - 1].res3;
  NN(m, lk_nn_layernorm_backward(nn, m->dres, m->lnfw->grad, GRAD(m->lnfb),
                                 m->dln, top, m->lnfw->data, m->lnf_mean,
                                 m->lnf_rstd, N, C));
  for (int l = m->L - 1; l >= 0; l--) {
    const block *k = &m->blocks[l];
    const layer_acts *a = &m->acts[l];
    const float *res = l ? m->acts[l - 1].res3 : m->enc, *d;
    /* res3 = res2 + dropout(mlp): dres is both branches' */
    if ((rc = undrop(m, a->fcmask, NC, &d)) != 0)
      return rc;
    if ((rc = linear_backward(m, m->dfchg, k->fcprojw, k->fcprojb, d, a->fchg,
                              N, 4 * C, C)) != 0)
      return rc;
    zero(m->dfch, 4 * NC);
    NN(m, lk_nn_gelu_backward(nn, m->dfch, m->dfchg, a->fch, 4 * NC));
    if ((rc = linear_backward(m, m->dln, k->fcw, k->fcb, m->dfch, a->ln2, N, C,
                              4 * C)) != 0)
      return rc;
    NN(m, lk_nn_layernorm_backward(nn, m->dres, k->ln2w->grad, GRAD(k->ln2b),
                                   m->dln, a->res2, k->ln2w->data, a->ln2_mean,
                                   a->ln2_rstd, N, C));
    /* res2 = res + dropout(attention) */
    if ((rc = undrop(m, a->attmask, NC, &d)) != 0)
      return rc;
    if ((rc = linear_backward(m, m->datty, k->attprojw, k->attprojb, d, a->atty,
                              N, C, C)) != 0)
      return rc;
    zero(m->dqkv, 3 * NC);
    NN(m, lk_nn_attention_backward(nn, m->dqkv, m->datty, a->qkv, a->att, B, T,
                                   C, NH));
    if ((rc = linear_backward(m, m->dln, k->qkvw, k->qkvb, m->dqkv, a->ln1, N,
                              C, 3 * C)) != 0)
      return rc;
    NN(m, lk_nn_layernorm_backward(nn, m->dres, k->ln1w->grad, GRAD(k->ln1b),
                                   m->dln, res, k->ln1w->data, a->ln1_mean,
                                   a->ln1_rstd, N, C));
  }
  /* enc = dropout(wte[x] + wpe[t]) */
  const float *d;
  if ((rc = undrop(m, m->encmask, NC, &d)) != 0)
    return rc;
  NN(m, lk_nn_embedding_backward(nn, m->wte->grad, d, b->x.data, N, V, C));
  NN(m, lk_nn_embedding_backward(nn, m->wpe->grad, d, m->pos, N, m->maxT, C));
  return 0;
}

/* ---- the descriptor ----------------------------------------------------- */

static const lk_option options[] = {
    {"n_layer", LK_OPT_INT, "4", "transformer blocks", "[1, 1024]"},
    {"n_head", LK_OPT_INT, "4",
     "attention heads (n_embd must be a multiple of it)", "[1, 4096]"},
    {"n_embd", LK_OPT_INT, "128", "embedding width", "[1, 65536]"},
    {"block_size", LK_OPT_INT, "64",
     "the longest context, positions of transformer.wpe (at least the "
     "data's samples)",
     "[1, 65536]"},
    {"vocab_size", LK_OPT_INT, "256",
     "tokens (256: bytes, as the text plugin's)", "[1, 1048576]"},
    {"dropout", LK_OPT_DOUBLE, "0",
     "dropout after the embeddings and on each residual branch, in training",
     "[0, 1)"},
    {"bias", LK_OPT_BOOL, "true", "biases in the linear and LayerNorm layers",
     NULL},
    {"init", LK_OPT_PATH, "",
     "initial parameters: a FILE.safetensors with nanoGPT's state_dict names "
     "and shapes (F32 or F64; lm_head.weight, the tied head, is ignored); "
     "empty: nanoGPT's init from the seed",
     NULL},
    {NULL, 0, NULL, NULL, NULL}};

/* The forward as an ONNX graph (onnx.c): tokens [N, T] to the logits
 * at every position [N, T, V]. */
static int onnx(void *self, lk_onnx *g) {
  gpt *m = self;
  lk_tensor **t = calloc((size_t)m->L * GPT_BLOCK_TENSORS, sizeof *t);
  if (!t)
    return lk_fail(m->host, LK_ENOMEM, "out of memory");
  for (int l = 0; l < m->L; l++) {
    const block *k = &m->blocks[l];
    lk_tensor *b[GPT_BLOCK_TENSORS] = {
        k->ln1w, k->ln1b, k->qkvw, k->qkvb, k->attprojw, k->attprojb,
        k->ln2w, k->ln2b, k->fcw,  k->fcb,  k->fcprojw,  k->fcprojb};
    memcpy(t + (size_t)l * GPT_BLOCK_TENSORS, b, sizeof b);
  }
  gpt_onnx_spec s = {m->L,   m->NH,  m->C,    m->maxT, m->V,
                     m->wte, m->wpe, m->lnfw, m->lnfb, t};
  int rc = gpt_onnx(g, &s);
  free(t);
  return rc ? lk_fail(m->host, rc, "%s", lk_last_error()) : 0;
}

static const lk_step_ops step_ops = {.training_step = training_step,
                                     .validation_step = validation_step,
                                     .predict_step = predict_step,
                                     .evaluation_end = evaluation_end,
                                     .onnx = onnx};
static const lk_backward_ops backward_ops = {.backward = backward};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor =
    BUNDLED_PLUGIN("gpt",
                   "nanoGPT's GPT-2 language model (tied head, pre-LayerNorm, "
                   "causal attention), written with the layer kit",
                   destroy, NULL, .step = &step_ops, .backward = &backward_ops);

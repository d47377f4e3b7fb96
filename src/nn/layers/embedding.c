/* Embedding: torch.nn.Embedding(num_embeddings, embedding_dim,
 * padding_idx): tokens i32 [T] to [T, embedding_dim], the first layer
 * only; weight N(0, 1) as torch's reset_parameters, padding_idx's row
 * zero and never trained (its gradient zero), as torch's. */
#include "layers.h"

enum { VOCAB, DIM, PAD };

static const lk_layer_arg args[] = {
    {"num_embeddings", LK_LAYER_INT,
     LK_LAYER_ARG_POSITIONAL | LK_LAYER_ARG_REQUIRED, NULL, 1, LAYER_SIZE_MAX,
     NULL, "the tokens it knows, 0 to num_embeddings - 1"},
    {"embedding_dim", LK_LAYER_INT,
     LK_LAYER_ARG_POSITIONAL | LK_LAYER_ARG_REQUIRED, NULL, 1, LAYER_SIZE_MAX,
     NULL, "the size of a token's vector"},
    {"padding_idx", LK_LAYER_INT, LK_LAYER_ARG_POSITIONAL, NULL,
     -LAYER_SIZE_MAX, LAYER_SIZE_MAX, NULL,
     "a token whose row starts at zero and is not trained (negative: from "
     "num_embeddings); none when not given"},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL}};

/* padding_idx's row, or -1 when none */
static int pad_row(const lk_layer *l) {
  const lk_layer_value *p = &l->args[PAD];
  return !p->set ? -1 : p->i < 0 ? p->i + l->args[VOCAB].i : p->i;
}

static int infer(lk_layer *l, int n_in, const lk_layer_shape *in,
                 lk_layer_shape *out) {
  (void)n_in;
  char a[64];
  int v = l->args[VOCAB].i;
  if (l->args[PAD].set && (l->args[PAD].i < -v || l->args[PAD].i >= v))
    return lk__err(LK_ECONFIG,
                   "padding_idx = %d: out of range for num_embeddings = %d "
                   "(expected -%d to %d)",
                   l->args[PAD].i, v, v, v - 1);
  if (in->dtype != LK_I32)
    return lk__err(LK_ECONFIG, "input %s: expected tokens, i32 [T]",
                   lk_layer_shape_text(&l->in, a, sizeof a));
  if (in->tokens > (size_t)l->args[VOCAB].i)
    return lk__err(LK_ECONFIG,
                   "num_embeddings = %d, but the data's tokens go up to %zu",
                   l->args[VOCAB].i, in->tokens - 1);
  out->dtype = LK_F32;
  out->tokens = 0;
  out->d[l->in.ndim] = l->args[DIM].i;
  out->ndim = l->in.ndim + 1;
  return 0;
}

static int tensors(const lk_layer *l, lk_layer_tensor *t) {
  layer_tensor(&t[0], "weight", LK_LAYER_PARAM, LK_F32, 2,
               (size_t)l->args[VOCAB].i, (size_t)l->args[DIM].i, 0, 0);
  return 1;
}

static void init(lk_layer *l, lk_rng *rng) {
  for (size_t k = 0; k < l->t[0]->numel; k++)
    ((float *)l->t[0]->data)[k] = (float)lk_rng_normal(rng);
  /* drawn, then zeroed, as torch's reset_parameters and
   * _fill_padding_idx_with_zero: the other rows as without padding_idx */
  int p = pad_row(l);
  if (p >= 0)
    memset((float *)l->t[0]->data + (size_t)p * (size_t)l->args[DIM].i, 0,
           (size_t)l->args[DIM].i * sizeof(float));
}

static int forward(lk_layer *l, lk_nn *nn, float *y, const float *const *x,
                   int n, bool training, lk_rng *rng) {
  (void)training, (void)rng;
  return lk_nn_embedding_forward(nn, y, (const int32_t *)(const void *)x[0],
                                 layer_data(l, 0), n * (int)l->in_numel,
                                 l->args[VOCAB].i, l->args[DIM].i);
}

/* the first layer: no input gradient; padding_idx's row none either (its
 * gradient is zero whatever was accumulated, as torch's) */
static int backward(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                    const float *const *x, const float *y, int n) {
  (void)dx, (void)y;
  float *g = layer_grad(l, 0);
  int rc = lk_nn_embedding_backward(
      nn, g, dy, (const int32_t *)(const void *)x[0], n * (int)l->in_numel,
      l->args[VOCAB].i, l->args[DIM].i);
  int p = pad_row(l);
  if (rc == 0 && g && p >= 0)
    memset(g + (size_t)p * (size_t)l->args[DIM].i, 0,
           (size_t)l->args[DIM].i * sizeof(float));
  return rc;
}

/* Gather of the weight's rows by the tokens (int64 in ONNX) */
static int onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                const char *out, const char *prefix) {
  char w[128];
  int rc = lk__layer_onnx_tensor(l, g, prefix, 0, w, sizeof w);
  const char *const x[2] = {w, in[0]};
  return rc ? rc : layer_onnx_op(g, "Gather", x, 2, out, NULL, 0);
}

const lk_layer_type lk__layer_embedding = {.size = LK_LAYER_TYPE_SIZE,
                                           .name = "embedding",
                                           .summary =
                                               "a learnt vector per token",
                                           .args = args,
                                           .flags = LK_LAYER_TOKENS,
                                           .min_inputs = 1,
                                           .max_inputs = 1,
                                           .infer = infer,
                                           .tensors = tensors,
                                           .init = init,
                                           .forward = forward,
                                           .backward = backward,
                                           .onnx = onnx};

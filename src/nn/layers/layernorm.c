/* LayerNorm: torch.nn.LayerNorm(normalized_shape, eps,
 * elementwise_affine) over the last dimension, normalized_shape inferred;
 * weight 1 and bias 0 as torch's reset_parameters. */
#include "layers.h"

enum { EPS, AFFINE, IN };

static const lk_layer_arg args[] = {
    {"eps", LK_LAYER_REAL, LK_LAYER_ARG_POSITIONAL | LK_LAYER_ARG_MIN_OPEN,
     "1e-5", 0, INFINITY, NULL, "added to the variance"},
    {"elementwise_affine", LK_LAYER_BOOL, LK_LAYER_ARG_POSITIONAL, "true", 0, 0,
     NULL, "a learnt weight and bias"},
    ARG_INPUT("normalized_shape", "the last dimension"),
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL}};

typedef struct ln_state {
  int rows, c;        /* rows of C values a sample */
  float *mean, *rstd; /* [cap rows] */
} ln_state;

static int infer(lk_layer *l, int n_in, const lk_layer_shape *in,
                 lk_layer_shape *out) {
  (void)n_in, (void)in, (void)out;
  ln_state *s = l->state;
  s->c = l->in.d[l->in.ndim - 1];
  s->rows = (int)(l->in_numel / (size_t)s->c);
  return layer_check_input(l, IN, s->c);
}

static int tensors(const lk_layer *l, lk_layer_tensor *t) {
  size_t c = (size_t)((const ln_state *)l->state)->c;
  if (!l->args[AFFINE].i)
    return 0;
  layer_tensor(&t[0], "weight", LK_LAYER_PARAM, LK_F32, 1, c, 0, 0, 0);
  layer_tensor(&t[1], "bias", LK_LAYER_PARAM, LK_F32, 1, c, 0, 0, 0);
  return 2;
}

static void init(lk_layer *l, lk_rng *rng) {
  (void)rng;
  for (size_t k = 0; l->n_t && k < l->t[0]->numel; k++)
    ((float *)l->t[0]->data)[k] = 1;
}

static void release(lk_layer *l) {
  ln_state *s = l->state;
  free(s->mean);
  free(s->rstd);
  s->mean = s->rstd = NULL;
}

static int reserve(lk_layer *l, size_t n) {
  ln_state *s = l->state;
  release(l);
  size_t rows = n * (size_t)s->rows;
  if (!(s->mean = malloc(rows * sizeof(float))) ||
      !(s->rstd = malloc(rows * sizeof(float)))) {
    release(l);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  return 0;
}

static int forward(lk_layer *l, lk_nn *nn, float *y, const float *const *x,
                   int n, bool training, lk_rng *rng) {
  (void)training, (void)rng;
  ln_state *s = l->state;
  return lk_nn_layernorm_forward(nn, y, s->mean, s->rstd, x[0],
                                 layer_data(l, 0), layer_data(l, 1),
                                 n * s->rows, s->c, (float)l->args[EPS].r);
}

static int backward(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                    const float *const *x, const float *y, int n) {
  (void)y;
  ln_state *s = l->state;
  return lk_nn_layernorm_backward(nn, dx[0], layer_grad(l, 0), layer_grad(l, 1),
                                  dy, x[0], layer_data(l, 0), s->mean, s->rstd,
                                  n * s->rows, s->c);
}

/* LayerNormalization over the last axis; without elementwise_affine, a
 * scale of ones and a bias of zeros */
static int onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                const char *out, const char *prefix) {
  const ln_state *s = l->state;
  char w[128], b[128];
  const char *x[3] = {in[0], w, b};
  int rc = 0;
  if (l->args[AFFINE].i) {
    rc = lk__layer_onnx_tensor(l, g, prefix, 0, w, sizeof w);
    if (rc == 0)
      rc = lk__layer_onnx_tensor(l, g, prefix, 1, b, sizeof b);
  } else {
    x[1] = lk__layer_onnx_const(g, "layernorm_one", NULL, 1, (size_t)s->c);
    x[2] = lk__layer_onnx_const(g, "layernorm_zero", NULL, 0, (size_t)s->c);
    rc = x[1] && x[2] ? 0 : LK_ENOMEM;
  }
  lk_onnx_attr a[2] = {
      {.name = "axis", .type = LK_ONNX_INT, .i = -1},
      {.name = "epsilon", .type = LK_ONNX_FLOAT, .f = (float)l->args[EPS].r}};
  return rc ? rc : layer_onnx_op(g, "LayerNormalization", x, 3, out, a, 2);
}

const lk_layer_type lk__layer_layernorm = {
    .size = LK_LAYER_TYPE_SIZE,
    .name = "layernorm",
    .summary = "layer normalization over the last dimension",
    .args = args,
    .min_inputs = 1,
    .max_inputs = 1,
    .state_size = sizeof(ln_state),
    .infer = infer,
    .tensors = tensors,
    .init = init,
    .reserve = reserve,
    .release = release,
    .forward = forward,
    .backward = backward,
    .onnx = onnx};

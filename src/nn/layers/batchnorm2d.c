/* BatchNorm2d: torch.nn.BatchNorm2d(num_features, eps, momentum, affine),
 * num_features inferred; the per-channel statistics over the batch and
 * the image, running_mean, running_var and num_batches_tracked kept as
 * buffers under torch's names. What BatchNorm1d shares with it is here
 * (lk__batchnorm_*), hidden. */
#include "batchnorm.h"

enum { EPS, MOMENTUM, AFFINE, IN };

const lk_layer_arg lk__batchnorm_args[] = {
    {"eps", LK_LAYER_REAL, LK_LAYER_ARG_POSITIONAL | LK_LAYER_ARG_MIN_OPEN,
     "1e-5", 0, INFINITY, NULL, "added to the variance"},
    {"momentum", LK_LAYER_REAL, LK_LAYER_ARG_POSITIONAL, "0.1", 0, 1, NULL,
     "of the running statistics"},
    {"affine", LK_LAYER_BOOL, LK_LAYER_ARG_POSITIONAL, "true", 0, 0, NULL,
     "a learnt weight and bias"},
    ARG_INPUT("num_features", "channels"),
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL}};

/* The channels C and the values per channel HW of l->in, checked against
 * num_features. */
int lk__batchnorm_infer(lk_layer *l, int c, int hw) {
  bn_state *s = l->state;
  s->c = c, s->hw = hw;
  return layer_check_input(l, IN, c);
}

static int infer(lk_layer *l, int n_in, const lk_layer_shape *in,
                 lk_layer_shape *out) {
  (void)n_in, (void)in, (void)out;
  int rc = layer_need_image(l);
  return rc ? rc
            : lk__batchnorm_infer(l, l->in.d[0],
                                  (int)(l->in_numel / (size_t)l->in.d[0]));
}

int lk__batchnorm_tensors(const lk_layer *l, lk_layer_tensor *t) {
  size_t c = (size_t)((const bn_state *)l->state)->c;
  int k = 0;
  if (l->args[AFFINE].i) {
    layer_tensor(&t[k++], "weight", LK_LAYER_PARAM, LK_F32, 1, c, 0, 0, 0);
    layer_tensor(&t[k++], "bias", LK_LAYER_PARAM, LK_F32, 1, c, 0, 0, 0);
  }
  layer_tensor(&t[k++], "running_mean", LK_LAYER_BUFFER, LK_F32, 1, c, 0, 0, 0);
  layer_tensor(&t[k], "running_var", LK_LAYER_BUFFER, LK_F32, 1, c, 0, 0, 0);
  t[k].checked = true, t[k].max = INFINITY;
  /* torch's is an int64; an f64 counts exactly to 2^53 */
  layer_tensor(&t[++k], "num_batches_tracked", LK_LAYER_BUFFER | LK_LAYER_COUNT,
               LK_F64, 0, 1, 0, 0, 0);
  t[k].checked = t[k].integer = true, t[k].max = LK_STATE_MAX_COUNT;
  return k + 1;
}

/* torch's reset_parameters: the weight 1, the bias 0 */
void lk__batchnorm_init(lk_layer *l, lk_rng *rng) {
  (void)rng;
  if (!l->args[AFFINE].i)
    return;
  for (size_t k = 0; k < l->t[0]->numel; k++)
    ((float *)l->t[0]->data)[k] = 1;
}

/* The buffers' index: after the weight and bias when affine. */
static int buffers(const lk_layer *l) {
  return l->args[AFFINE].i ? 2 : 0;
}

int lk__batchnorm_bind(lk_layer *l) {
  bn_state *s = l->state;
  size_t c = (size_t)s->c;
  if (!(s->mean = malloc(c * sizeof(float))) ||
      !(s->rstd = malloc(c * sizeof(float))))
    return lk__err(LK_ENOMEM, "out of memory");
  float *var = l->t[buffers(l) + 1]->data;
  for (size_t k = 0; k < c; k++)
    var[k] = 1;
  return 0;
}

void lk__batchnorm_release(lk_layer *l) {
  bn_state *s = l->state;
  free(s->mean);
  free(s->rstd);
  s->mean = s->rstd = NULL;
}

int lk__batchnorm_forward(lk_layer *l, lk_nn *nn, float *y,
                          const float *const *x, int n, bool training,
                          lk_rng *rng) {
  (void)rng;
  bn_state *s = l->state;
  int b = buffers(l);
  int rc = lk_nn_batchnorm_forward(
      nn, y, s->mean, s->rstd, x[0], b ? layer_data(l, 0) : NULL,
      b ? layer_data(l, 1) : NULL, l->t[b]->data, l->t[b + 1]->data, n, s->c,
      s->hw, training, (float)l->args[MOMENTUM].r, (float)l->args[EPS].r);
  if (rc == 0 && training)
    *(double *)l->t[b + 2]->data += 1;
  return rc;
}

int lk__batchnorm_backward(lk_layer *l, lk_nn *nn, float *const *dx,
                           const float *dy, const float *const *x,
                           const float *y, int n) {
  (void)y;
  bn_state *s = l->state;
  bool affine = buffers(l);
  return lk_nn_batchnorm_backward(nn, dx[0], affine ? layer_grad(l, 0) : NULL,
                                  affine ? layer_grad(l, 1) : NULL, dy, x[0],
                                  affine ? layer_data(l, 0) : NULL, s->mean,
                                  s->rstd, n, s->c, s->hw, true);
}

/* BatchNormalization with the running statistics (evaluation); without
 * affine, a scale of ones and a bias of zeros */
int lk__batchnorm_onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                       const char *out, const char *prefix) {
  const bn_state *s = l->state;
  char names[4][128];
  const char *x[5] = {in[0], names[0], names[1], names[2], names[3]};
  int b = buffers(l), rc = 0;
  for (int k = 0; rc == 0 && k < b + 2; k++)
    rc = lk__layer_onnx_tensor(l, g, prefix, k, names[k + 2 - b],
                               sizeof names[0]);
  if (rc == 0 && !b) {
    x[1] = lk__layer_onnx_const(g, "batchnorm_one", NULL, 1, (size_t)s->c);
    x[2] = lk__layer_onnx_const(g, "batchnorm_zero", NULL, 0, (size_t)s->c);
    rc = x[1] && x[2] ? 0 : LK_ENOMEM;
  }
  lk_onnx_attr eps = {
      .name = "epsilon", .type = LK_ONNX_FLOAT, .f = (float)l->args[EPS].r};
  return rc ? rc : layer_onnx_op(g, "BatchNormalization", x, 5, out, &eps, 1);
}

const lk_layer_type lk__layer_batchnorm2d = {
    .size = LK_LAYER_TYPE_SIZE,
    .name = "batchnorm2d",
    .summary = "batch normalization of an image [C, H, W] per channel",
    .args = lk__batchnorm_args,
    .flags = LK_LAYER_TRAIN_DIFFERS,
    .min_inputs = 1,
    .max_inputs = 1,
    .state_size = sizeof(bn_state),
    .infer = infer,
    .tensors = lk__batchnorm_tensors,
    .init = lk__batchnorm_init,
    .bind = lk__batchnorm_bind,
    .release = lk__batchnorm_release,
    .forward = lk__batchnorm_forward,
    .backward = lk__batchnorm_backward,
    .onnx = lk__batchnorm_onnx};

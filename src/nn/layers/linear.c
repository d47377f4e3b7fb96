/* Linear: torch.nn.Linear(in_features, out_features, bias) over the last
 * dimension, in_features inferred; weight [out, in] and bias [out],
 * kaiming_uniform_(a = sqrt(5)) as torch's reset_parameters. */
#include "layers.h"

enum { OUT, BIAS, IN };

static const lk_layer_arg args[] = {
    {"out_features", LK_LAYER_INT,
     LK_LAYER_ARG_POSITIONAL | LK_LAYER_ARG_REQUIRED, NULL, 1, LAYER_SIZE_MAX,
     NULL, "the output's last dimension"},
    {"bias", LK_LAYER_BOOL, LK_LAYER_ARG_POSITIONAL, "true", 0, 0, NULL,
     "a learnt bias"},
    ARG_INPUT("in_features", "the input's last dimension"),
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL}};

/* rows of in_features values a sample */
static int rows(const lk_layer *l) {
  return (int)(l->in_numel / (size_t)l->in.d[l->in.ndim - 1]);
}

static int infer(lk_layer *l, int n_in, const lk_layer_shape *in,
                 lk_layer_shape *out) {
  (void)n_in, (void)in;
  int rc = layer_check_input(l, IN, l->in.d[l->in.ndim - 1]);
  out->d[l->in.ndim - 1] = l->args[OUT].i;
  return rc;
}

static int tensors(const lk_layer *l, lk_layer_tensor *t) {
  size_t out = (size_t)l->args[OUT].i;
  layer_tensor(&t[0], "weight", LK_LAYER_PARAM, LK_F32, 2, out,
               (size_t)l->in.d[l->in.ndim - 1], 0, 0);
  if (!l->args[BIAS].i)
    return 1;
  layer_tensor(&t[1], "bias", LK_LAYER_PARAM, LK_F32, 1, out, 0, 0, 0);
  return 2;
}

static int forward(lk_layer *l, lk_nn *nn, float *y, const float *const *x,
                   int n, bool training, lk_rng *rng) {
  (void)training, (void)rng;
  return lk_nn_linear_forward(nn, y, x[0], layer_data(l, 0), layer_data(l, 1),
                              n * rows(l), l->in.d[l->in.ndim - 1],
                              l->args[OUT].i);
}

static int backward(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                    const float *const *x, const float *y, int n) {
  (void)y;
  return lk_nn_linear_backward(nn, dx[0], layer_grad(l, 0), layer_grad(l, 1),
                               dy, x[0], layer_data(l, 0), n * rows(l),
                               l->in.d[l->in.ndim - 1], l->args[OUT].i);
}

const lk_layer_type lk__layer_linear = {.size = LK_LAYER_TYPE_SIZE,
                                        .name = "linear",
                                        .summary = "y = x W^T + b",
                                        .args = args,
                                        .min_inputs = 1,
                                        .max_inputs = 1,
                                        .infer = infer,
                                        .tensors = tensors,
                                        .init = layer_init_kaiming,
                                        .forward = forward,
                                        .backward = backward};

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

/* Gemm (transB) on [N, in]; MatMul by the transposed weight, then Add,
 * on more dimensions */
static int onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                const char *out, const char *prefix) {
  char w[128], b[128];
  bool bias = l->args[BIAS].i;
  int rc = lk__layer_onnx_tensor(l, g, prefix, 0, w, sizeof w);
  if (rc == 0 && bias)
    rc = lk__layer_onnx_tensor(l, g, prefix, 1, b, sizeof b);
  const char *x[3] = {in[0], w, b};
  lk_onnx_attr tb = {.name = "transB", .type = LK_ONNX_INT, .i = 1};
  if (rc != 0 || l->in.ndim == 1)
    return rc ? rc : layer_onnx_op(g, "Gemm", x, bias ? 3 : 2, out, &tb, 1);
  static const int64_t perm[2] = {1, 0};
  lk_onnx_attr p = {.name = "perm", .type = LK_ONNX_INTS, .ints = perm, .n = 2};
  const char *wt = lk_onnx_tmp(g, "linear_wt");
  const char *y = bias ? lk_onnx_tmp(g, "linear_xw") : out;
  if (!wt || !y)
    return LK_ENOMEM;
  const char *xw[2] = {in[0], wt}, *yb[2] = {y, b};
  if ((rc = layer_onnx_op(g, "Transpose", x + 1, 1, wt, &p, 1)) != 0 ||
      (rc = layer_onnx_op(g, "MatMul", xw, 2, y, NULL, 0)) != 0)
    return rc;
  return bias ? layer_onnx_op(g, "Add", yb, 2, out, NULL, 0) : 0;
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
                                        .backward = backward,
                                        .onnx = onnx};

/* ELU: torch.nn.ELU(alpha), elementwise; its backward differentiates
 * through its input (alpha e^x at and below 0, as torch). */
#include <float.h>

#include "layers.h"

static const lk_layer_arg args[] = {
    {"alpha", LK_LAYER_REAL, LK_LAYER_ARG_POSITIONAL, "1.0", -INFINITY,
     INFINITY, NULL, "the value alpha (e^x - 1) tends to as x -> -inf"},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL}};

/* The kit computes in f32: alpha must be a finite float. */
static int infer(lk_layer *l, int n_in, const lk_layer_shape *in,
                 lk_layer_shape *out) {
  (void)n_in, (void)in, (void)out;
  if (!(fabs(l->args[0].r) <= FLT_MAX))
    return lk__err(LK_ECONFIG, "alpha = %g: out of a float's range",
                   l->args[0].r);
  return 0;
}

static int forward(lk_layer *l, lk_nn *nn, float *y, const float *const *x,
                   int n, bool training, lk_rng *rng) {
  (void)training, (void)rng;
  return lk_nn_elu_forward(nn, y, x[0], (size_t)n * l->out_numel,
                           (float)l->args[0].r);
}

static int backward(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                    const float *const *x, const float *y, int n) {
  (void)y;
  return dx[0]
             ? lk_nn_elu_backward(nn, dx[0], dy, x[0], (size_t)n * l->out_numel,
                                  (float)l->args[0].r)
             : 0;
}

static int onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                const char *out, const char *prefix) {
  (void)prefix;
  lk_onnx_attr a = {
      .name = "alpha", .type = LK_ONNX_FLOAT, .f = (float)l->args[0].r};
  return layer_onnx_op(g, "Elu", in, 1, out, &a, 1);
}

const lk_layer_type lk__layer_elu = {.size = LK_LAYER_TYPE_SIZE,
                                     .name = "elu",
                                     .summary =
                                         "x if x > 0, else alpha (e^x - 1)",
                                     .args = args,
                                     .min_inputs = 1,
                                     .max_inputs = 1,
                                     .infer = infer,
                                     .forward = forward,
                                     .backward = backward,
                                     .onnx = onnx};

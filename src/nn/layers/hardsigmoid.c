/* Hardsigmoid: torch.nn.Hardsigmoid(), elementwise; its backward differentiates
 * through its input, with torch's formula (loopkit/nn.h). */
#include "layers.h"

static int forward(lk_layer *l, lk_nn *nn, float *y, const float *const *x,
                   int n, bool training, lk_rng *rng) {
  (void)training, (void)rng;
  return lk_nn_hardsigmoid_forward(nn, y, x[0], (size_t)n * l->out_numel);
}

static int backward(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                    const float *const *x, const float *y, int n) {
  (void)y;
  return dx[0] ? lk_nn_hardsigmoid_backward(nn, dx[0], dy, x[0],
                                            (size_t)n * l->out_numel)
               : 0;
}

/* ONNX's default alpha is 0.2: torch's is x / 6 + 1/2 */
static int onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                const char *out, const char *prefix) {
  (void)l, (void)prefix;
  lk_onnx_attr a[2] = {
      {.name = "alpha", .type = LK_ONNX_FLOAT, .f = 1.0f / 6.0f},
      {.name = "beta", .type = LK_ONNX_FLOAT, .f = 0.5f}};
  return layer_onnx_op(g, "HardSigmoid", in, 1, out, a, 2);
}

const lk_layer_type lk__layer_hardsigmoid = {.size = LK_LAYER_TYPE_SIZE,
                                             .name = "hardsigmoid",
                                             .summary =
                                                 "min(max(x + 3, 0), 6) / 6",
                                             .min_inputs = 1,
                                             .max_inputs = 1,
                                             .forward = forward,
                                             .backward = backward,
                                             .onnx = onnx};

/* Hardswish: torch.nn.Hardswish(), elementwise; its backward differentiates
 * through its input, with torch's formula (loopkit/nn.h). */
#include "layers.h"

static int forward(lk_layer *l, lk_nn *nn, float *y, const float *const *x,
                   int n, bool training, lk_rng *rng) {
  (void)training, (void)rng;
  return lk_nn_hardswish_forward(nn, y, x[0], (size_t)n * l->out_numel);
}

static int backward(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                    const float *const *x, const float *y, int n) {
  (void)y;
  return dx[0] ? lk_nn_hardswish_backward(nn, dx[0], dy, x[0],
                                          (size_t)n * l->out_numel)
               : 0;
}

/* HardSwish is in the default domain since opset 14 */
static int onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                const char *out, const char *prefix) {
  (void)l, (void)prefix;
  return layer_onnx_op(g, "HardSwish", in, 1, out, NULL, 0);
}

const lk_layer_type lk__layer_hardswish = {.size = LK_LAYER_TYPE_SIZE,
                                           .name = "hardswish",
                                           .summary =
                                               "x min(max(x + 3, 0), 6) / 6",
                                           .min_inputs = 1,
                                           .max_inputs = 1,
                                           .forward = forward,
                                           .backward = backward,
                                           .onnx = onnx};

/* Mish: torch.nn.Mish(), elementwise; its backward differentiates through its
 * input, with torch's formula (loopkit/nn.h). */
#include "layers.h"

static int forward(lk_layer *l, lk_nn *nn, float *y, const float *const *x,
                   int n, bool training, lk_rng *rng) {
  (void)training, (void)rng;
  return lk_nn_mish_forward(nn, y, x[0], (size_t)n * l->out_numel);
}

static int backward(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                    const float *const *x, const float *y, int n) {
  (void)y;
  return dx[0] ? lk_nn_mish_backward(nn, dx[0], dy, x[0],
                                     (size_t)n * l->out_numel)
               : 0;
}

/* x tanh(softplus(x)): ONNX's Mish is opset 18, the file's 17 */
static int onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                const char *out, const char *prefix) {
  (void)l, (void)prefix;
  const char *sp = lk_onnx_tmp(g, "mish"), *th = lk_onnx_tmp(g, "mish");
  if (!sp || !th)
    return LK_ENOMEM;
  int rc = layer_onnx_op(g, "Softplus", in, 1, sp, NULL, 0);
  if (rc == 0)
    rc = layer_onnx_op(g, "Tanh", &sp, 1, th, NULL, 0);
  const char *xs[2] = {in[0], th};
  return rc ? rc : layer_onnx_op(g, "Mul", xs, 2, out, NULL, 0);
}

const lk_layer_type lk__layer_mish = {.size = LK_LAYER_TYPE_SIZE,
                                      .name = "mish",
                                      .summary = "x tanh(softplus(x))",
                                      .min_inputs = 1,
                                      .max_inputs = 1,
                                      .forward = forward,
                                      .backward = backward,
                                      .onnx = onnx};

/* SiLU: torch.nn.SiLU(), elementwise; its backward differentiates through its
 * input, with torch's formula (loopkit/nn.h). */
#include "layers.h"

static int forward(lk_layer *l, lk_nn *nn, float *y, const float *const *x,
                   int n, bool training, lk_rng *rng) {
  (void)training, (void)rng;
  return lk_nn_silu_forward(nn, y, x[0], (size_t)n * l->out_numel);
}

static int backward(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                    const float *const *x, const float *y, int n) {
  (void)y;
  return dx[0] ? lk_nn_silu_backward(nn, dx[0], dy, x[0],
                                     (size_t)n * l->out_numel)
               : 0;
}

/* x sigmoid(x): opset 17 has no SiLU */
static int onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                const char *out, const char *prefix) {
  (void)l, (void)prefix;
  const char *s = lk_onnx_tmp(g, "silu");
  if (!s)
    return LK_ENOMEM;
  int rc = layer_onnx_op(g, "Sigmoid", in, 1, s, NULL, 0);
  const char *xs[2] = {in[0], s};
  return rc ? rc : layer_onnx_op(g, "Mul", xs, 2, out, NULL, 0);
}

const lk_layer_type lk__layer_silu = {.size = LK_LAYER_TYPE_SIZE,
                                      .name = "silu",
                                      .summary = "x sigmoid(x)",
                                      .min_inputs = 1,
                                      .max_inputs = 1,
                                      .forward = forward,
                                      .backward = backward,
                                      .onnx = onnx};

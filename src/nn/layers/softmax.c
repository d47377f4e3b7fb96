/* Softmax: torch.nn.Softmax(dim), e^x / sum e^x over dimension dim (the
 * batch's is 0, as torch counts; dim is required); its backward
 * differentiates through its output. */
#include "softmax.h"

static const lk_layer_arg args[] = SOFTMAX_ARGS;

static int forward(lk_layer *l, lk_nn *nn, float *y, const float *const *x,
                   int n, bool training, lk_rng *rng) {
  (void)training, (void)rng;
  int outer = 0, D = 0, inner = 0;
  int rc = softmax_geometry(l, n, &outer, &D, &inner);
  return rc ? rc : lk_nn_softmax_dim_forward(nn, y, x[0], outer, D, inner);
}

static int backward(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                    const float *const *x, const float *y, int n) {
  (void)x;
  if (!dx[0])
    return 0;
  int outer = 0, D = 0, inner = 0;
  int rc = softmax_geometry(l, n, &outer, &D, &inner);
  return rc ? rc
            : lk_nn_softmax_dim_backward(nn, dx[0], dy, y, outer, D, inner);
}

/* axis: torch's dim counted with the batch, as ONNX counts */
static int onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                const char *out, const char *prefix) {
  (void)prefix;
  lk_onnx_attr a = {0};
  int rc = softmax_onnx_axis(l, &a);
  return rc ? rc : layer_onnx_op(g, "Softmax", in, 1, out, &a, 1);
}

const lk_layer_type lk__layer_softmax = {.size = LK_LAYER_TYPE_SIZE,
                                         .name = "softmax",
                                         .summary = "e^x / sum e^x over dim",
                                         .args = args,
                                         .min_inputs = 1,
                                         .max_inputs = 1,
                                         .infer = softmax_infer,
                                         .forward = forward,
                                         .backward = backward,
                                         .onnx = onnx};

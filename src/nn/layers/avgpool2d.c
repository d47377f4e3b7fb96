/* AvgPool2d: torch.nn.AvgPool2d(kernel_size, stride, padding), padding
 * counted (count_include_pad = True). */
#include "layers.h"

static int infer(lk_layer *l, int n_in, const lk_layer_shape *in,
                 lk_layer_shape *out) {
  (void)n_in, (void)in;
  int rc = layer_need_image(l);
  return rc ? rc
            : lk__layer_window(l, false, 0, POOL_KERNEL, POOL_STRIDE,
                               POOL_PADDING, l->state, out);
}

static int forward(lk_layer *l, lk_nn *nn, float *y, const float *const *x,
                   int n, bool training, lk_rng *rng) {
  (void)training, (void)rng;
  lk_nn_pool2d *p = l->state;
  p->n = n;
  return lk_nn_avgpool2d_forward(nn, p, y, x[0]);
}

static int backward(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                    const float *const *x, const float *y, int n) {
  (void)x, (void)y;
  lk_nn_pool2d *p = l->state;
  p->n = n;
  return dx[0] ? lk_nn_avgpool2d_backward(nn, p, dx[0], dy) : 0;
}

/* AveragePool, the padding counted as torch's count_include_pad */
static int onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                const char *out, const char *prefix) {
  (void)prefix;
  lk_onnx_attr a[4];
  int64_t ints[8];
  lk__layer_onnx_window(l->state, a, ints);
  a[3] =
      (lk_onnx_attr){.name = "count_include_pad", .type = LK_ONNX_INT, .i = 1};
  return layer_onnx_op(g, "AveragePool", in, 1, out, a, 4);
}

const lk_layer_type lk__layer_avgpool2d = {
    .size = LK_LAYER_TYPE_SIZE,
    .name = "avgpool2d",
    .summary = "the mean over windows of an image [C, H, W]",
    .args = lk__layer_pool_args,
    .min_inputs = 1,
    .max_inputs = 1,
    .state_size = sizeof(lk_nn_pool2d),
    .infer = infer,
    .forward = forward,
    .backward = backward,
    .onnx = onnx};

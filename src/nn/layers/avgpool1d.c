/* AvgPool1d: torch.nn.AvgPool1d(kernel_size, stride, padding) over a
 * sequence [C, L], padding counted (count_include_pad = True), as
 * avgpool2d's kernel on [C, 1, L]. */
#include "layers.h"

static int infer(lk_layer *l, int n_in, const lk_layer_shape *in,
                 lk_layer_shape *out) {
  (void)n_in, (void)in;
  int rc = layer_need_sequence(l);
  return rc ? rc : lk__layer_pool1d(l, l->state, out);
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

/* AveragePool on [N, C, L], the padding counted */
static int onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                const char *out, const char *prefix) {
  (void)prefix;
  lk_onnx_attr a[4];
  int64_t ints[4];
  lk__layer_onnx_window1d(l->state, a, ints);
  a[3] =
      (lk_onnx_attr){.name = "count_include_pad", .type = LK_ONNX_INT, .i = 1};
  return layer_onnx_op(g, "AveragePool", in, 1, out, a, 4);
}

const lk_layer_type lk__layer_avgpool1d = {
    .size = LK_LAYER_TYPE_SIZE,
    .name = "avgpool1d",
    .summary = "the mean over windows of a sequence [C, L]",
    .args = lk__layer_pool1d_args,
    .min_inputs = 1,
    .max_inputs = 1,
    .state_size = sizeof(lk_nn_pool2d),
    .infer = infer,
    .forward = forward,
    .backward = backward,
    .onnx = onnx};

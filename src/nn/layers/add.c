/* Add: x[0] + x[1], of one shape, as torch's `x + y` in a residual block
 * (sequential's add(@NAME)); no parameters. Its backward passes the
 * gradient to both inputs. */
#include "layers.h"

static int infer(lk_layer *l, int n_in, const lk_layer_shape *in,
                 lk_layer_shape *out) {
  (void)l, (void)out;
  char a[64], b[64];
  bool same = n_in == 2 && in[0].ndim == in[1].ndim && in[0].dtype == LK_F32 &&
              in[1].dtype == LK_F32;
  for (int d = 0; same && d < in[0].ndim; d++)
    same = in[0].d[d] == in[1].d[d];
  if (same)
    return 0;
  if (in[0].dtype != LK_F32 || (n_in == 2 && in[1].dtype != LK_F32))
    return lk__err(LK_ECONFIG, "adds f32 values, not tokens");
  return lk__err(LK_ECONFIG,
                 "shapes %s and %s differ: add takes two tensors of one "
                 "shape",
                 lk_layer_shape_text(&in[0], a, sizeof a),
                 lk_layer_shape_text(&in[n_in - 1], b, sizeof b));
}

static int forward(lk_layer *l, lk_nn *nn, float *y, const float *const *x,
                   int n, bool training, lk_rng *rng) {
  (void)training, (void)rng;
  return lk_nn_residual_forward(nn, y, x[0], x[1], (size_t)n * l->out_numel);
}

static int backward(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                    const float *const *x, const float *y, int n) {
  (void)x, (void)y;
  size_t count = (size_t)n * l->out_numel;
  if (dx[0] == dx[1]) /* add(@NAME) of the current tensor itself */
    return dx[0] ? lk_nn_residual_backward(nn, dx[0], NULL, dy, count) == 0 &&
                           lk_nn_residual_backward(nn, dx[0], NULL, dy,
                                                   count) == 0
                       ? 0
                       : LK_EINVAL
                 : 0;
  return lk_nn_residual_backward(nn, dx[0], dx[1], dy, count);
}

static int onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                const char *out, const char *prefix) {
  (void)l, (void)prefix;
  return layer_onnx_op(g, "Add", in, 2, out, NULL, 0);
}

const lk_layer_type lk__layer_add = {
    .size = LK_LAYER_TYPE_SIZE,
    .name = "add",
    .summary = "x + y: a marked tensor added to the current one",
    .min_inputs = 2,
    .max_inputs = 2,
    .infer = infer,
    .forward = forward,
    .backward = backward,
    .onnx = onnx};

/* Last: loopkit's own (torch has no such module): [T, C] -> [C], the last
 * time step, as torch's out[:, -1, :] on a batch_first sequence: what a
 * sequence classifier puts between a recurrent layer and its linear head. */
#include "layers.h"

static int infer(lk_layer *l, int n_in, const lk_layer_shape *in,
                 lk_layer_shape *out) {
  (void)n_in;
  char a[64];
  if (in->dtype != LK_F32 || in->ndim != 2)
    return lk__err(LK_ECONFIG,
                   "input %s; expected a sequence [T, C] (an lstm's or a "
                   "gru's output)",
                   lk_layer_shape_text(&l->in, a, sizeof a));
  out->ndim = 1;
  out->d[0] = in->d[1];
  return 0;
}

static int forward(lk_layer *l, lk_nn *nn, float *y, const float *const *x,
                   int n, bool training, lk_rng *rng) {
  (void)nn, (void)training, (void)rng;
  size_t c = l->out_numel, skip = l->in_numel - c;
  for (int i = 0; i < n; i++)
    memcpy(y + (size_t)i * c, x[0] + (size_t)i * l->in_numel + skip,
           c * sizeof(float));
  return 0;
}

static int backward(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                    const float *const *x, const float *y, int n) {
  (void)nn, (void)x, (void)y;
  size_t c = l->out_numel, skip = l->in_numel - c;
  for (int i = 0; dx[0] && i < n; i++)
    for (size_t j = 0; j < c; j++)
      dx[0][(size_t)i * l->in_numel + skip + j] += dy[(size_t)i * c + j];
  return 0;
}

/* Gather of step T - 1 on axis 1 ([N, 1, C]), then Reshape to [N, C] */
static int onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                const char *out, const char *prefix) {
  (void)prefix;
  const char *idx = lk_onnx_tmp(g, "last_step");
  const char *shape = lk_onnx_tmp(g, "last_shape");
  const char *step = lk_onnx_tmp(g, "last_gather");
  if (!idx || !shape || !step)
    return LK_ENOMEM;
  int64_t t = l->in.d[0] - 1, dims[2] = {0, l->in.d[1]};
  int rc;
  if ((rc = lk_onnx_const_i64(g, idx, &t, 1)) != 0 ||
      (rc = lk_onnx_const_i64(g, shape, dims, 2)) != 0)
    return rc;
  const char *gi[2] = {in[0], idx}, *ri[2] = {step, shape};
  lk_onnx_attr axis = {.name = "axis", .type = LK_ONNX_INT, .i = 1};
  if ((rc = layer_onnx_op(g, "Gather", gi, 2, step, &axis, 1)) != 0)
    return rc;
  return layer_onnx_op(g, "Reshape", ri, 2, out, NULL, 0);
}

const lk_layer_type lk__layer_last = {
    .size = LK_LAYER_TYPE_SIZE,
    .name = "last",
    .summary = "the last step of a sequence [T, C] -> [C] (loopkit's own)",
    .min_inputs = 1,
    .max_inputs = 1,
    .infer = infer,
    .forward = forward,
    .backward = backward,
    .onnx = onnx};

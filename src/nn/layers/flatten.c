/* Flatten: torch.nn.Flatten(start_dim, end_dim), dims counted with the
 * batch as 0 as torch's; a view: the output is the input's memory. */
#include "layers.h"

enum { START, END };

static const lk_layer_arg args[] = {
    {"start_dim", LK_LAYER_INT, LK_LAYER_ARG_POSITIONAL, "1", -8, 8, NULL,
     "the first dimension merged (0 is the batch's)"},
    {"end_dim", LK_LAYER_INT, LK_LAYER_ARG_POSITIONAL, "-1", -8, 8, NULL,
     "the last dimension merged"},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL}};

static int infer(lk_layer *l, int n_in, const lk_layer_shape *in,
                 lk_layer_shape *out) {
  (void)n_in, (void)in;
  char a[64];
  lk_layer_shape_text(&l->in, a, sizeof a);
  int s0 = l->args[START].i, e0 = l->args[END].i, nd = l->in.ndim + 1;
  int st = s0 < 0 ? s0 + nd : s0, en = e0 < 0 ? e0 + nd : e0;
  if (st < 0 || st >= nd || en < 0 || en >= nd)
    return lk__err(LK_ECONFIG,
                   "start_dim %d, end_dim %d for an input of %d dimensions "
                   "with the batch (%s per sample)",
                   s0, e0, nd, a);
  if (st == 0)
    return lk__err(LK_ECONFIG,
                   "start_dim %d would merge the batch into the samples", s0);
  if (en < st)
    return lk__err(LK_ECONFIG, "end_dim %d is before start_dim %d", e0, s0);
  /* the kit's shape function, on the sample's dimensions */
  if (lk_nn_flatten(l->in.d, l->in.ndim, st - 1, en - 1, out->d, &out->ndim) !=
      0)
    return lk__err_prefix(LK_ECONFIG, "input %s", a);
  return 0;
}

/* a Reshape to [batch, out...]: any start_dim and end_dim */
static int onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                const char *out, const char *prefix) {
  (void)prefix;
  int64_t shape[LK_MAX_DIMS + 1] = {-1};
  for (int d = 0; d < l->out.ndim; d++)
    shape[d + 1] = l->out.d[d];
  const char *s = lk_onnx_tmp(g, "flatten_shape");
  int rc =
      s ? lk_onnx_const_i64(g, s, shape, (size_t)l->out.ndim + 1) : LK_ENOMEM;
  const char *const x[2] = {in[0], s};
  return rc ? rc : layer_onnx_op(g, "Reshape", x, 2, out, NULL, 0);
}

const lk_layer_type lk__layer_flatten = {
    .size = LK_LAYER_TYPE_SIZE,
    .name = "flatten",
    .summary = "merges dimensions: the same values, another shape",
    .args = args,
    .flags = LK_LAYER_VIEW,
    .min_inputs = 1,
    .max_inputs = 1,
    .infer = infer,
    .onnx = onnx};

/* Cat: torch.cat((x[0], x[1]), dim=1), the batch's dimension 1, which is
 * the first of a sample's (channels of an image, features of a vector):
 * a sample's values are its first input's then its second's
 * (sequential's cat(@NAME)); no parameters. */
#include "layers.h"

typedef struct cat_state {
  size_t second; /* values a sample of the second input holds */
} cat_state;

static int infer(lk_layer *l, int n_in, const lk_layer_shape *in,
                 lk_layer_shape *out) {
  char a[64], b[64];
  cat_state *s = l->state;
  const lk_layer_shape *x = &in[0], *z = &in[n_in - 1];
  if (x->dtype != LK_F32 || z->dtype != LK_F32)
    return lk__err(LK_ECONFIG, "concatenates f32 values, not tokens");
  bool fits = n_in == 2 && x->ndim == z->ndim && x->ndim >= 1;
  for (int d = 1; fits && d < x->ndim; d++)
    fits = x->d[d] == z->d[d];
  if (!fits)
    return lk__err(LK_ECONFIG,
                   "shapes %s and %s: cat joins tensors along dimension 1 "
                   "(a sample's first), every other dimension the same",
                   lk_layer_shape_text(x, a, sizeof a),
                   lk_layer_shape_text(z, b, sizeof b));
  *out = *x;
  out->d[0] = x->d[0] + z->d[0];
  s->second = 1;
  for (int d = 0; d < z->ndim; d++)
    s->second *= (size_t)z->d[d];
  return 0;
}

static int forward(lk_layer *l, lk_nn *nn, float *y, const float *const *x,
                   int n, bool training, lk_rng *rng) {
  (void)nn, (void)training, (void)rng;
  const cat_state *s = l->state;
  size_t first = l->in_numel, second = s->second;
  for (size_t i = 0; i < (size_t)n; i++) {
    memcpy(y + i * l->out_numel, x[0] + i * first, first * sizeof *y);
    memcpy(y + i * l->out_numel + first, x[1] + i * second, second * sizeof *y);
  }
  return 0;
}

static int backward(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                    const float *const *x, const float *y, int n) {
  (void)nn, (void)x, (void)y;
  const cat_state *s = l->state;
  size_t width[2] = {l->in_numel, s->second};
  for (size_t i = 0; i < (size_t)n; i++)
    for (int k = 0; k < 2; k++) {
      float *d = dx[k] ? dx[k] + i * width[k] : NULL;
      const float *g = dy + i * l->out_numel + (k ? width[0] : 0);
      for (size_t j = 0; d && j < width[k]; j++)
        d[j] += g[j];
    }
  return 0;
}

/* torch.cat(dim=1): ONNX's axis 1, the batch's dimension 1 */
static int onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                const char *out, const char *prefix) {
  (void)l, (void)prefix;
  lk_onnx_attr axis = {.name = "axis", .type = LK_ONNX_INT, .i = 1};
  return layer_onnx_op(g, "Concat", in, 2, out, &axis, 1);
}

const lk_layer_type lk__layer_cat = {
    .size = LK_LAYER_TYPE_SIZE,
    .name = "cat",
    .summary = "torch.cat along dimension 1: the current tensor, then a "
               "marked one",
    .min_inputs = 2,
    .max_inputs = 2,
    .state_size = sizeof(cat_state),
    .infer = infer,
    .forward = forward,
    .backward = backward,
    .onnx = onnx};

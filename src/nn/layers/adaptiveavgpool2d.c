/* AdaptiveAvgPool2d: torch.nn.AdaptiveAvgPool2d(output_size) over an image
 * [C, H, W], torch's bins (start floor(i H / OH), end ceil((i + 1) H /
 * OH)). adaptiveavgpool2d(1) is global average pooling. An output larger
 * than the input is refused (torch repeats values there). */
#include "layers.h"

static const lk_layer_arg args[] = {
    {"output_size", LK_LAYER_PAIR,
     LK_LAYER_ARG_POSITIONAL | LK_LAYER_ARG_REQUIRED, NULL, 1, LAYER_SIZE_MAX,
     NULL, "the output's size, s or (h, w), at most the input's"},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL}};

static int infer(lk_layer *l, int n_in, const lk_layer_shape *in,
                 lk_layer_shape *out) {
  (void)n_in, (void)in;
  lk_nn_adaptivepool2d *p = l->state;
  char a[64];
  int rc = layer_need_image(l);
  if (rc)
    return rc;
  *p = (lk_nn_adaptivepool2d){.n = 1,
                              .c = l->in.d[0],
                              .h = l->in.d[1],
                              .w = l->in.d[2],
                              .oh = l->args[0].i,
                              .ow = l->args[0].j};
  if (p->oh > p->h || p->ow > p->w)
    return lk__err(LK_ECONFIG,
                   "output_size %d x %d is larger than the input %s", p->oh,
                   p->ow, lk_layer_shape_text(&l->in, a, sizeof a));
  out->ndim = 3, out->d[0] = p->c, out->d[1] = p->oh, out->d[2] = p->ow;
  return 0;
}

static int forward(lk_layer *l, lk_nn *nn, float *y, const float *const *x,
                   int n, bool training, lk_rng *rng) {
  (void)training, (void)rng;
  lk_nn_adaptivepool2d *p = l->state;
  p->n = n;
  return lk_nn_adaptiveavgpool2d_forward(nn, p, y, x[0]);
}

static int backward(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                    const float *const *x, const float *y, int n) {
  (void)x, (void)y;
  lk_nn_adaptivepool2d *p = l->state;
  p->n = n;
  return dx[0] ? lk_nn_adaptiveavgpool2d_backward(nn, p, dx[0], dy) : 0;
}

/* GlobalAveragePool for 1 x 1, AveragePool for uniform bins */
static int onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                const char *out, const char *prefix) {
  (void)prefix;
  return lk__layer_onnx_adaptive(l->state, false, g, in, out);
}

const lk_layer_type lk__layer_adaptiveavgpool2d = {
    .size = LK_LAYER_TYPE_SIZE,
    .name = "adaptiveavgpool2d",
    .summary = "the mean over output_size bins of an image [C, H, W]",
    .args = args,
    .min_inputs = 1,
    .max_inputs = 1,
    .state_size = sizeof(lk_nn_adaptivepool2d),
    .infer = infer,
    .forward = forward,
    .backward = backward,
    .onnx = onnx};

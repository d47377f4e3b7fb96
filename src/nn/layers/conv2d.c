/* Conv2d: torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride,
 * padding, dilation, groups, bias), in_channels inferred. weight [out,
 * in / groups, kh, kw] and bias [out], kaiming_uniform_(a = sqrt(5)) as
 * torch's reset_parameters. */
#include "layers.h"

enum { OUT, KERNEL, STRIDE, PADDING, BIAS, IN, DILATION, GROUPS };

static const lk_layer_arg args[] = {
    {"out_channels", LK_LAYER_INT,
     LK_LAYER_ARG_POSITIONAL | LK_LAYER_ARG_REQUIRED, NULL, 1, LAYER_SIZE_MAX,
     NULL, "channels of the output"},
    {"kernel_size", LK_LAYER_PAIR,
     LK_LAYER_ARG_POSITIONAL | LK_LAYER_ARG_REQUIRED, NULL, 1, LAYER_SIZE_MAX,
     NULL, "the kernel, k or (kh, kw)"},
    {"stride", LK_LAYER_PAIR, LK_LAYER_ARG_POSITIONAL, "1", 1, LAYER_SIZE_MAX,
     NULL, "the step of the kernel"},
    {"padding", LK_LAYER_PAIR, LK_LAYER_ARG_POSITIONAL, "0", 0, LAYER_SIZE_MAX,
     NULL, "implicit zeros on each side"},
    {"bias", LK_LAYER_BOOL, 0, "true", 0, 0, NULL, "a learnt bias"},
    ARG_INPUT("in_channels", "channels of the input"),
    {"dilation", LK_LAYER_PAIR, 0, "1", 1, LAYER_SIZE_MAX, NULL,
     "the spacing of the kernel's taps"},
    {"groups", LK_LAYER_INT, 0, "1", 1, LAYER_SIZE_MAX, NULL,
     "channel groups, each convolved alone (in_channels: depthwise); "
     "divides both channel counts"},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL}};

static const int where[] = {
    [WIN_OUT] = OUT,         [WIN_KERNEL] = KERNEL,     [WIN_STRIDE] = STRIDE,
    [WIN_PADDING] = PADDING, [WIN_DILATION] = DILATION, [WIN_GROUPS] = GROUPS};

static int infer(lk_layer *l, int n_in, const lk_layer_shape *in,
                 lk_layer_shape *out) {
  (void)n_in, (void)in;
  int rc = layer_need_image(l);
  if (rc == 0)
    rc = layer_check_input(l, IN, l->in.d[0]);
  return rc ? rc : lk__layer_conv(l, false, where, l->state, out);
}

static int tensors(const lk_layer *l, lk_layer_tensor *t) {
  size_t oc = (size_t)l->args[OUT].i;
  layer_tensor(&t[0], "weight", LK_LAYER_PARAM, LK_F32, 4, oc,
               (size_t)(l->in.d[0] / l->args[GROUPS].i),
               (size_t)l->args[KERNEL].i, (size_t)l->args[KERNEL].j);
  if (!l->args[BIAS].i)
    return 1;
  layer_tensor(&t[1], "bias", LK_LAYER_PARAM, LK_F32, 1, oc, 0, 0, 0);
  return 2;
}

static int forward(lk_layer *l, lk_nn *nn, float *y, const float *const *x,
                   int n, bool training, lk_rng *rng) {
  (void)training, (void)rng;
  lk_nn_conv2d *c = l->state;
  c->n = n;
  return lk_nn_conv2d_forward(nn, c, y, x[0], layer_data(l, 0),
                              layer_data(l, 1));
}

static int backward(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                    const float *const *x, const float *y, int n) {
  (void)y;
  lk_nn_conv2d *c = l->state;
  c->n = n;
  return lk_nn_conv2d_backward(nn, c, dx[0], layer_grad(l, 0), layer_grad(l, 1),
                               dy, x[0], layer_data(l, 0));
}

/* Conv, with dilations and group */
static int onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                const char *out, const char *prefix) {
  return lk__layer_onnx_conv(l, g, in, out, prefix, l->state, false,
                             l->args[BIAS].i);
}

const lk_layer_type lk__layer_conv2d = {
    .size = LK_LAYER_TYPE_SIZE,
    .name = "conv2d",
    .summary = "2-d convolution over an image [C, H, W]",
    .args = args,
    .min_inputs = 1,
    .max_inputs = 1,
    .state_size = sizeof(lk_nn_conv2d),
    .infer = infer,
    .tensors = tensors,
    .init = layer_init_kaiming,
    .forward = forward,
    .backward = backward,
    .onnx = onnx};

/* GELU: torch.nn.GELU(approximate='tanh'), elementwise, the only
 * approximation the kit has; its backward differentiates through its input. */
#include "layers.h"

static const lk_layer_arg args[] = {
    {"approximate", LK_LAYER_WORD, LK_LAYER_ARG_POSITIONAL, "tanh", 0, 0,
     "tanh", "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))"},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL}};

static int forward(lk_layer *l, lk_nn *nn, float *y, const float *const *x,
                   int n, bool training, lk_rng *rng) {
  (void)training, (void)rng;
  return lk_nn_gelu_forward(nn, y, x[0], (size_t)n * l->out_numel);
}

static int backward(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                    const float *const *x, const float *y, int n) {
  (void)y;
  return dx[0] ? lk_nn_gelu_backward(nn, dx[0], dy, x[0],
                                     (size_t)n * l->out_numel)
               : 0;
}

/* the tanh approximation as the kit computes it:
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); opset 17 has no Gelu */
static int onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                const char *out, const char *prefix) {
  (void)l, (void)prefix;
  const char *c3 = lk__layer_onnx_const(g, "gelu_c", NULL, 0.044715f, 0);
  const char *k = lk__layer_onnx_const(g, "gelu_k", NULL, 0.7978845608f, 0);
  const char *half = lk__layer_onnx_const(g, "gelu_half", NULL, 0.5f, 0);
  const char *one = lk__layer_onnx_const(g, "gelu_one", NULL, 1.0f, 0);
  const char *t[8];
  for (int i = 0; i < 8; i++)
    t[i] = lk_onnx_tmp(g, "gelu");
  if (!c3 || !k || !half || !one || !t[7])
    return LK_ENOMEM;
  const char *x = in[0];
  /* x^2, x^3, 0.044715 x^3, x + ..., sqrt(2/pi) (...), tanh, 1 + tanh,
   * 0.5 x */
  const char *steps[8][3] = {{"Mul", x, x},      {"Mul", t[0], x},
                             {"Mul", t[1], c3},  {"Add", x, t[2]},
                             {"Mul", t[3], k},   {"Tanh", t[4], ""},
                             {"Add", t[5], one}, {"Mul", x, half}};
  int rc = 0;
  for (int i = 0; rc == 0 && i < 8; i++)
    rc = layer_onnx_op(g, steps[i][0], steps[i] + 1, *steps[i][2] ? 2 : 1, t[i],
                       NULL, 0);
  const char *y[2] = {t[7], t[6]};
  return rc ? rc : layer_onnx_op(g, "Mul", y, 2, out, NULL, 0);
}

const lk_layer_type lk__layer_gelu = {
    .size = LK_LAYER_TYPE_SIZE,
    .name = "gelu",
    .summary = "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))",
    .args = args,
    .min_inputs = 1,
    .max_inputs = 1,
    .forward = forward,
    .backward = backward,
    .onnx = onnx};

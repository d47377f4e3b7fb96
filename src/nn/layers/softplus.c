/* Softplus: torch.nn.Softplus(beta, threshold), elementwise, with torch's
 * threshold rule (x itself where beta x > threshold); its backward
 * differentiates through its input. */
#include <float.h>

#include "layers.h"

enum { BETA, THRESHOLD };

static const lk_layer_arg args[] = {
    {"beta", LK_LAYER_REAL, LK_LAYER_ARG_POSITIONAL | LK_LAYER_ARG_MIN_OPEN,
     "1.0", 0, INFINITY, NULL, "log(1 + e^(beta x)) / beta"},
    {"threshold", LK_LAYER_REAL, LK_LAYER_ARG_POSITIONAL, "20.0", -INFINITY,
     INFINITY, NULL, "x itself where beta x is above it"},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL}};

/* The kit computes in f32: beta must stay a positive normal float, and
 * the threshold a finite one. */
static int infer(lk_layer *l, int n_in, const lk_layer_shape *in,
                 lk_layer_shape *out) {
  (void)n_in, (void)in, (void)out;
  double b = l->args[BETA].r, t = l->args[THRESHOLD].r;
  if (!(b >= FLT_MIN && b <= FLT_MAX))
    return lk__err(LK_ECONFIG, "beta = %g: out of a float's range (%g to %g)",
                   b, (double)FLT_MIN, (double)FLT_MAX);
  if (!(fabs(t) <= FLT_MAX))
    return lk__err(LK_ECONFIG, "threshold = %g: out of a float's range", t);
  return 0;
}

static int forward(lk_layer *l, lk_nn *nn, float *y, const float *const *x,
                   int n, bool training, lk_rng *rng) {
  (void)training, (void)rng;
  return lk_nn_softplus_forward(nn, y, x[0], (size_t)n * l->out_numel,
                                (float)l->args[BETA].r,
                                (float)l->args[THRESHOLD].r);
}

static int backward(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                    const float *const *x, const float *y, int n) {
  (void)y;
  return dx[0] ? lk_nn_softplus_backward(
                     nn, dx[0], dy, x[0], (size_t)n * l->out_numel,
                     (float)l->args[BETA].r, (float)l->args[THRESHOLD].r)
               : 0;
}

/* ONNX's Softplus has neither beta nor threshold: log(1 + e^(beta x)) /
 * beta from it, and torch's threshold rule with Where (the branch not
 * taken may overflow; Where does not look at it) */
static int onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                const char *out, const char *prefix) {
  (void)prefix;
  const char *beta =
      lk__layer_onnx_const(g, "softplus_beta", NULL, (float)l->args[BETA].r, 0);
  const char *thr = lk__layer_onnx_const(g, "softplus_threshold", NULL,
                                         (float)l->args[THRESHOLD].r, 0);
  const char *t[4];
  for (int i = 0; i < 4; i++)
    t[i] = lk_onnx_tmp(g, "softplus");
  if (!beta || !thr || !t[3])
    return LK_ENOMEM;
  /* beta x, softplus(beta x), its / beta, beta x > threshold */
  const char *steps[4][3] = {{"Mul", in[0], beta},
                             {"Softplus", t[0], ""},
                             {"Div", t[1], beta},
                             {"Greater", t[0], thr}};
  int rc = 0;
  for (int i = 0; rc == 0 && i < 4; i++)
    rc = layer_onnx_op(g, steps[i][0], steps[i] + 1, *steps[i][2] ? 2 : 1, t[i],
                       NULL, 0);
  const char *w[3] = {t[3], in[0], t[2]};
  return rc ? rc : layer_onnx_op(g, "Where", w, 3, out, NULL, 0);
}

const lk_layer_type lk__layer_softplus = {
    .size = LK_LAYER_TYPE_SIZE,
    .name = "softplus",
    .summary = "log(1 + e^(beta x)) / beta; x where beta x > threshold",
    .args = args,
    .min_inputs = 1,
    .max_inputs = 1,
    .infer = infer,
    .forward = forward,
    .backward = backward,
    .onnx = onnx};

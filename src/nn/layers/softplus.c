/* Softplus: torch.nn.Softplus(beta, threshold), elementwise, with torch's
 * threshold rule (x itself where beta x > threshold); its backward
 * differentiates through its input. */
#include "layers.h"

enum { BETA, THRESHOLD };

static const lk_layer_arg args[] = {
    {"beta", LK_LAYER_REAL, LK_LAYER_ARG_POSITIONAL | LK_LAYER_ARG_MIN_OPEN,
     "1.0", 0, INFINITY, NULL, "log(1 + e^(beta x)) / beta"},
    {"threshold", LK_LAYER_REAL, LK_LAYER_ARG_POSITIONAL, "20.0", -INFINITY,
     INFINITY, NULL, "x itself where beta x is above it"},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL}};

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

const lk_layer_type lk__layer_softplus = {
    .size = LK_LAYER_TYPE_SIZE,
    .name = "softplus",
    .summary = "log(1 + e^(beta x)) / beta; x where beta x > threshold",
    .args = args,
    .min_inputs = 1,
    .max_inputs = 1,
    .forward = forward,
    .backward = backward};

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

const lk_layer_type lk__layer_gelu = {
    .size = LK_LAYER_TYPE_SIZE,
    .name = "gelu",
    .summary = "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))",
    .args = args,
    .min_inputs = 1,
    .max_inputs = 1,
    .forward = forward,
    .backward = backward};

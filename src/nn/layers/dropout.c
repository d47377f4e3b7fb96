/* Dropout: torch.nn.Dropout(p); in training each value is kept with
 * probability 1 - p and scaled by 1 / (1 - p), the mask drawn from the
 * run's generator (so a resumed run draws the same); in evaluation the
 * identity. */
#include "layers.h"

static const lk_layer_arg args[] = {
    {"p", LK_LAYER_REAL, LK_LAYER_ARG_POSITIONAL | LK_LAYER_ARG_MAX_OPEN, "0.5",
     0, 1, NULL, "the probability of a value to be zeroed"},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL}};

static void release(lk_layer *l) {
  uint8_t **mask = l->state;
  free(*mask);
  *mask = NULL;
}

static int reserve(lk_layer *l, size_t n) {
  uint8_t **mask = l->state;
  release(l);
  if (!(*mask = malloc(n * l->out_numel)))
    return lk__err(LK_ENOMEM, "out of memory");
  return 0;
}

static int forward(lk_layer *l, lk_nn *nn, float *y, const float *const *x,
                   int n, bool training, lk_rng *rng) {
  uint8_t **mask = l->state;
  return lk_nn_dropout_forward(nn, y, *mask, x[0], (size_t)n * l->out_numel,
                               (float)l->args[0].r, training, rng);
}

static int backward(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                    const float *const *x, const float *y, int n) {
  (void)x, (void)y;
  uint8_t **mask = l->state;
  return dx[0] ? lk_nn_dropout_backward(nn, dx[0], dy, *mask,
                                        (size_t)n * l->out_numel,
                                        (float)l->args[0].r, true)
               : 0;
}

/* evaluation: the identity */
static int onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                const char *out, const char *prefix) {
  (void)l, (void)prefix;
  return layer_onnx_op(g, "Identity", in, 1, out, NULL, 0);
}

const lk_layer_type lk__layer_dropout = {
    .size = LK_LAYER_TYPE_SIZE,
    .name = "dropout",
    .summary = "zeroes values at random in training",
    .args = args,
    .flags = LK_LAYER_TRAIN_DIFFERS,
    .min_inputs = 1,
    .max_inputs = 1,
    .state_size = sizeof(uint8_t *),
    .reserve = reserve,
    .release = release,
    .forward = forward,
    .backward = backward,
    .onnx = onnx};

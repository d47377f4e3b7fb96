/* MaxPool1d: torch.nn.MaxPool1d(kernel_size, stride, padding) over a
 * sequence [C, L], as maxpool2d's kernel on [C, 1, L]. It keeps each
 * output's argmax for the backward. */
#include "layers.h"

typedef struct pool_state {
  lk_nn_pool2d pool;
  int32_t *argmax; /* [cap, out_numel] */
} pool_state;

static int infer(lk_layer *l, int n_in, const lk_layer_shape *in,
                 lk_layer_shape *out) {
  (void)n_in, (void)in;
  pool_state *s = l->state;
  int rc = layer_need_sequence(l);
  return rc ? rc : lk__layer_pool1d(l, &s->pool, out);
}

static void release(lk_layer *l) {
  pool_state *s = l->state;
  free(s->argmax);
  s->argmax = NULL;
}

static int reserve(lk_layer *l, size_t n) {
  pool_state *s = l->state;
  release(l);
  if (!(s->argmax = malloc(n * l->out_numel * sizeof *s->argmax)))
    return lk__err(LK_ENOMEM, "out of memory");
  return 0;
}

static int forward(lk_layer *l, lk_nn *nn, float *y, const float *const *x,
                   int n, bool training, lk_rng *rng) {
  (void)training, (void)rng;
  pool_state *s = l->state;
  s->pool.n = n;
  return lk_nn_maxpool2d_forward(nn, &s->pool, y, s->argmax, x[0]);
}

static int backward(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                    const float *const *x, const float *y, int n) {
  (void)x, (void)y;
  pool_state *s = l->state;
  s->pool.n = n;
  return dx[0] ? lk_nn_maxpool2d_backward(nn, &s->pool, dx[0], dy, s->argmax)
               : 0;
}

/* MaxPool on [N, C, L] */
static int onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                const char *out, const char *prefix) {
  (void)prefix;
  const pool_state *s = l->state;
  lk_onnx_attr a[3];
  int64_t ints[4];
  lk__layer_onnx_window1d(&s->pool, a, ints);
  return layer_onnx_op(g, "MaxPool", in, 1, out, a, 3);
}

const lk_layer_type lk__layer_maxpool1d = {
    .size = LK_LAYER_TYPE_SIZE,
    .name = "maxpool1d",
    .summary = "the maximum over windows of a sequence [C, L]",
    .args = lk__layer_pool1d_args,
    .min_inputs = 1,
    .max_inputs = 1,
    .state_size = sizeof(pool_state),
    .infer = infer,
    .reserve = reserve,
    .release = release,
    .forward = forward,
    .backward = backward,
    .onnx = onnx};

/* MaxPool2d: torch.nn.MaxPool2d(kernel_size, stride, padding). It keeps
 * each output's argmax for the backward. A ReLU just before it runs
 * after it instead (fuse_prev): the same values and gradients, since max
 * and ReLU commute and where a window's maximum is not positive both give
 * it no gradient, on a quarter of the values for a 2 x 2 pool. */
#include "layers.h"

typedef struct pool_state {
  lk_nn_pool2d pool;
  bool relu_after; /* does the ReLU before it, after the pool */
  int32_t *argmax; /* [cap, out_numel] */
  float *scratch;  /* relu_after: [cap, out_numel], the ReLU's gradient */
} pool_state;

static int infer(lk_layer *l, int n_in, const lk_layer_shape *in,
                 lk_layer_shape *out) {
  (void)n_in, (void)in;
  pool_state *s = l->state;
  int rc = layer_need_image(l);
  return rc ? rc
            : lk__layer_window(l, false, 0, POOL_KERNEL, POOL_STRIDE,
                               POOL_PADDING, &s->pool, out);
}

static bool fuse_prev(lk_layer *l, const lk_layer *prev) {
  pool_state *s = l->state;
  s->relu_after = prev->type == &lk__layer_relu;
  return s->relu_after;
}

static void release(lk_layer *l) {
  pool_state *s = l->state;
  free(s->argmax);
  free(s->scratch);
  s->argmax = NULL, s->scratch = NULL;
}

static int reserve(lk_layer *l, size_t n) {
  pool_state *s = l->state;
  release(l);
  size_t count = n * l->out_numel;
  if (!(s->argmax = malloc(count * sizeof *s->argmax)) ||
      (s->relu_after && !(s->scratch = malloc(count * sizeof *s->scratch)))) {
    release(l);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  return 0;
}

static int forward(lk_layer *l, lk_nn *nn, float *y, const float *const *x,
                   int n, bool training, lk_rng *rng) {
  (void)training, (void)rng;
  pool_state *s = l->state;
  s->pool.n = n;
  int rc = lk_nn_maxpool2d_forward(nn, &s->pool, y, s->argmax, x[0]);
  return rc == 0 && s->relu_after
             ? lk_nn_relu_forward(nn, y, y, (size_t)n * l->out_numel)
             : rc;
}

static int backward(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                    const float *const *x, const float *y, int n) {
  (void)x;
  pool_state *s = l->state;
  if (!dx[0])
    return 0;
  s->pool.n = n;
  if (s->relu_after) { /* the ReLU's backward first */
    size_t count = (size_t)n * l->out_numel;
    memset(s->scratch, 0, count * sizeof *s->scratch);
    int rc = lk_nn_relu_backward(nn, s->scratch, dy, y, count);
    if (rc != 0)
      return rc;
    dy = s->scratch;
  }
  return lk_nn_maxpool2d_backward(nn, &s->pool, dx[0], dy, s->argmax);
}

/* MaxPool; a ReLU fused into it is lowered as its own layer */
static int onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                const char *out, const char *prefix) {
  (void)prefix;
  const pool_state *s = l->state;
  lk_onnx_attr a[3];
  int64_t ints[8];
  lk__layer_onnx_window(&s->pool, a, ints);
  return layer_onnx_op(g, "MaxPool", in, 1, out, a, 3);
}

const lk_layer_type lk__layer_maxpool2d = {
    .size = LK_LAYER_TYPE_SIZE,
    .name = "maxpool2d",
    .summary = "the maximum over windows of an image [C, H, W]",
    .args = lk__layer_pool_args,
    .min_inputs = 1,
    .max_inputs = 1,
    .state_size = sizeof(pool_state),
    .infer = infer,
    .fuse_prev = fuse_prev,
    .reserve = reserve,
    .release = release,
    .forward = forward,
    .backward = backward,
    .onnx = onnx};

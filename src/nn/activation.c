/* Elementwise activations: ReLU, GELU (tanh), tanh, sigmoid.
 *   inp, out, dout, dinp [n]
 * Each is one pass over runs of GRAIN values: ReLU here, the others by
 * kernels.h, in the widest vectors the CPU has.
 * The backward formulas are torch's (threshold_backward, tanh_backward,
 * sigmoid_backward); GELU's forward and backward are torch's
 * approximate='tanh' ones written through a sigmoid (vmath.h), equal to
 * them but for rounding. */
#include "nn_internal.h"
#include "vmath.h"

#define GRAIN 16384

typedef enum act { RELU, GELU, TANH, SIGMOID } act;

typedef struct job {
  const nn_kernels *k;
  act kind;
  size_t n;
  int parts;
  float *out;
  const float *inp, *dout;
} job;

static nn_vf relu(nn_vf v) {
  return nn_sel((v > 0.0f) | (v != v), v, nn_splat(0.0f)); /* NaN stays */
}

static void forward_task(void *ctx, int task, int thread) {
  (void)thread;
  const job *j = ctx;
  size_t lo, hi;
  nn__range16(j->n, j->parts, task, &lo, &hi);
  float *y = j->out + lo;
  const float *x = j->inp + lo;
  switch (j->kind) {
  case RELU: NN_MAP(hi - lo, y, x, relu(v)); break;
  case GELU: j->k->gelu(y, x, hi - lo); break;
  case TANH: j->k->tanh(y, x, hi - lo); break;
  case SIGMOID: j->k->sigmoid(y, x, hi - lo); break;
  }
}

/* dinp += dout f'(v), v = the output (ReLU, tanh, sigmoid) or the input
 * (GELU). */
static void backward_task(void *ctx, int task, int thread) {
  (void)thread;
  const job *j = ctx;
  size_t lo, hi;
  nn__range16(j->n, j->parts, task, &lo, &hi);
  float *dx = j->out + lo;
  const float *dy = j->dout + lo, *x = j->inp + lo;
  switch (j->kind) {
  case RELU:
    NN_ACC(hi - lo, dx, dy, x, nn_sel(v > 0.0f, d, nn_splat(0.0f)));
    break;
  case GELU: j->k->gelu_grad(dx, dy, x, hi - lo); break;
  case TANH: NN_ACC(hi - lo, dx, dy, x, d * (1.0f - v * v)); break;
  case SIGMOID: NN_ACC(hi - lo, dx, dy, x, d * (1.0f - v) * v); break;
  }
}

static const char *const names[] = {"relu", "gelu", "tanh", "sigmoid"};

static int forward(lk_nn *nn, act kind, float *out, const float *inp,
                   size_t n) {
  if (!nn || !out || !inp)
    return lk__err(LK_EINVAL, "%s: forward needs the context, out and inp",
                   names[kind]);
  if (n < 1)
    return lk__err(LK_EINVAL, "%s: n = 0 values; expected >= 1", names[kind]);
  job j = {.k = nn->k,
           .kind = kind,
           .n = n,
           .out = out,
           .inp = inp,
           .parts = nn__parts(n, GRAIN)};
  nn__run(nn, j.parts, forward_task, &j);
  return 0;
}

static int backward(lk_nn *nn, act kind, float *dinp, const float *dout,
                    const float *v, size_t n) {
  if (!nn || !dout || !v)
    return lk__err(LK_EINVAL, "%s: backward needs the context, dout and %s",
                   names[kind], kind == GELU ? "inp" : "out");
  if (n < 1)
    return lk__err(LK_EINVAL, "%s: n = 0 values; expected >= 1", names[kind]);
  if (!dinp)
    return 0;
  job j = {.k = nn->k,
           .kind = kind,
           .n = n,
           .out = dinp,
           .inp = v,
           .dout = dout,
           .parts = nn__parts(n, GRAIN)};
  nn__run(nn, j.parts, backward_task, &j);
  return 0;
}

int lk_nn_relu_forward(lk_nn *nn, float *out, const float *inp, size_t n) {
  return forward(nn, RELU, out, inp, n);
}
int lk_nn_relu_backward(lk_nn *nn, float *dinp, const float *dout,
                        const float *out, size_t n) {
  return backward(nn, RELU, dinp, dout, out, n);
}
int lk_nn_gelu_forward(lk_nn *nn, float *out, const float *inp, size_t n) {
  return forward(nn, GELU, out, inp, n);
}
int lk_nn_gelu_backward(lk_nn *nn, float *dinp, const float *dout,
                        const float *inp, size_t n) {
  return backward(nn, GELU, dinp, dout, inp, n);
}
int lk_nn_tanh_forward(lk_nn *nn, float *out, const float *inp, size_t n) {
  return forward(nn, TANH, out, inp, n);
}
int lk_nn_tanh_backward(lk_nn *nn, float *dinp, const float *dout,
                        const float *out, size_t n) {
  return backward(nn, TANH, dinp, dout, out, n);
}
int lk_nn_sigmoid_forward(lk_nn *nn, float *out, const float *inp, size_t n) {
  return forward(nn, SIGMOID, out, inp, n);
}
int lk_nn_sigmoid_backward(lk_nn *nn, float *dinp, const float *dout,
                           const float *out, size_t n) {
  return backward(nn, SIGMOID, dinp, dout, out, n);
}

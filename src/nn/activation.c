/* Elementwise activations: ReLU, GELU (tanh), tanh, sigmoid, SiLU,
 * LeakyReLU, ELU, softplus, Mish, hardswish, hardsigmoid.
 *   inp, out, dout, dinp [n]
 * Each is one pass over runs of GRAIN values: those without an exp here
 * (ReLU, LeakyReLU, the hard ones), the others by kernels.h, in the widest
 * vectors the CPU has.
 * The backward formulas are torch's (threshold_backward, tanh_backward,
 * sigmoid_backward, silu_backward, leaky_relu_backward, elu_backward,
 * softplus_backward, mish_backward, hardswish_backward,
 * hardsigmoid_backward), kinks included: hardswish's derivative is
 * x / 3 + 1/2 on [-3, 3) (so -1/2 at -3, and 1 at 3), hardsigmoid's 1/6
 * on (-3, 3) only, LeakyReLU's and ELU's those of x <= 0 at 0. GELU's
 * forward and backward are torch's approximate='tanh' ones written through
 * a sigmoid (vmath.h), equal to them but for rounding. */
#include <math.h>

#include "nn_internal.h"
#include "vmath.h"

#define GRAIN 16384

typedef enum act {
  RELU,
  GELU,
  TANH,
  SIGMOID,
  SILU,
  LEAKYRELU,
  ELU,
  SOFTPLUS,
  MISH,
  HARDSWISH,
  HARDSIGMOID
} act;

typedef struct job {
  const nn_kernels *k;
  act kind;
  size_t n;
  int parts;
  float a, b; /* LeakyReLU's slope, ELU's alpha, softplus's beta, threshold */
  float *out;
  const float *inp, *dout;
} job;

static nn_vf relu(nn_vf v) {
  return nn_sel((v > 0.0f) | (v != v), v, nn_splat(0.0f)); /* NaN stays */
}

/* torch's min(max(x + 3, 0), 6), hardswish's and hardsigmoid's */
static nn_vf relu6_3(nn_vf v) {
  nn_vf c = v + 3.0f;
  c = nn_sel(c > 0.0f, c, nn_splat(0.0f));
  return nn_sel(c < 6.0f, c, nn_splat(6.0f));
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
  case SILU: j->k->silu(y, x, hi - lo); break;
  case LEAKYRELU: {
    float a = j->a;
    NN_MAP(hi - lo, y, x, nn_sel(v > 0.0f, v, v * a));
    break;
  }
  case ELU: j->k->elu(y, x, hi - lo, j->a, j->b); break;
  case SOFTPLUS: j->k->softplus(y, x, hi - lo, j->a, j->b); break;
  case MISH: j->k->mish(y, x, hi - lo); break;
  case HARDSWISH: NN_MAP(hi - lo, y, x, v * relu6_3(v) / 6.0f); break;
  case HARDSIGMOID: NN_MAP(hi - lo, y, x, relu6_3(v) / 6.0f); break;
  }
}

/* dinp += dout f'(v), v = the output (ReLU, tanh, sigmoid) or the input
 * (the others). */
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
  case SILU: j->k->silu_grad(dx, dy, x, hi - lo); break;
  case LEAKYRELU: {
    float a = j->a;
    NN_ACC(hi - lo, dx, dy, x, nn_sel(v > 0.0f, d, d * a));
    break;
  }
  case ELU: j->k->elu_grad(dx, dy, x, hi - lo, j->a, j->b); break;
  case SOFTPLUS: j->k->softplus_grad(dx, dy, x, hi - lo, j->a, j->b); break;
  case MISH: j->k->mish_grad(dx, dy, x, hi - lo); break;
  case HARDSWISH:
    NN_ACC(hi - lo, dx, dy, x,
           nn_sel(v < -3.0f, nn_splat(0.0f),
                  nn_sel(v < 3.0f, d * (v / 3.0f + 0.5f), d)));
    break;
  case HARDSIGMOID:
    NN_ACC(hi - lo, dx, dy, x,
           nn_sel((v > -3.0f) & (v < 3.0f), d * (1.0f / 6.0f), nn_splat(0.0f)));
    break;
  }
}

static const char *const names[] = {
    "relu", "gelu",     "tanh", "sigmoid",   "silu",       "leakyrelu",
    "elu",  "softplus", "mish", "hardswish", "hardsigmoid"};

/* which activations differentiate through their output */
static bool through_out(act kind) {
  return kind == RELU || kind == TANH || kind == SIGMOID;
}

static int forward(lk_nn *nn, act kind, float *out, const float *inp, size_t n,
                   float a, float b) {
  if (!nn || !out || !inp)
    return lk__err(LK_EINVAL, "%s: forward needs the context, out and inp",
                   names[kind]);
  if (n < 1)
    return lk__err(LK_EINVAL, "%s: n = 0 values; expected >= 1", names[kind]);
  job j = {.k = nn->k,
           .kind = kind,
           .n = n,
           .a = a,
           .b = b,
           .out = out,
           .inp = inp,
           .parts = nn__parts(n, GRAIN)};
  nn__run(nn, j.parts, forward_task, &j);
  return 0;
}

static int backward(lk_nn *nn, act kind, float *dinp, const float *dout,
                    const float *v, size_t n, float a, float b) {
  if (!nn || !dout || !v)
    return lk__err(LK_EINVAL, "%s: backward needs the context, dout and %s",
                   names[kind], through_out(kind) ? "out" : "inp");
  if (n < 1)
    return lk__err(LK_EINVAL, "%s: n = 0 values; expected >= 1", names[kind]);
  if (!dinp)
    return 0;
  job j = {.k = nn->k,
           .kind = kind,
           .n = n,
           .a = a,
           .b = b,
           .out = dinp,
           .inp = v,
           .dout = dout,
           .parts = nn__parts(n, GRAIN)};
  nn__run(nn, j.parts, backward_task, &j);
  return 0;
}

int lk_nn_relu_forward(lk_nn *nn, float *out, const float *inp, size_t n) {
  return forward(nn, RELU, out, inp, n, 0, 0);
}
int lk_nn_relu_backward(lk_nn *nn, float *dinp, const float *dout,
                        const float *out, size_t n) {
  return backward(nn, RELU, dinp, dout, out, n, 0, 0);
}
int lk_nn_gelu_forward(lk_nn *nn, float *out, const float *inp, size_t n) {
  return forward(nn, GELU, out, inp, n, 0, 0);
}
int lk_nn_gelu_backward(lk_nn *nn, float *dinp, const float *dout,
                        const float *inp, size_t n) {
  return backward(nn, GELU, dinp, dout, inp, n, 0, 0);
}
int lk_nn_tanh_forward(lk_nn *nn, float *out, const float *inp, size_t n) {
  return forward(nn, TANH, out, inp, n, 0, 0);
}
int lk_nn_tanh_backward(lk_nn *nn, float *dinp, const float *dout,
                        const float *out, size_t n) {
  return backward(nn, TANH, dinp, dout, out, n, 0, 0);
}
int lk_nn_sigmoid_forward(lk_nn *nn, float *out, const float *inp, size_t n) {
  return forward(nn, SIGMOID, out, inp, n, 0, 0);
}
int lk_nn_sigmoid_backward(lk_nn *nn, float *dinp, const float *dout,
                           const float *out, size_t n) {
  return backward(nn, SIGMOID, dinp, dout, out, n, 0, 0);
}
int lk_nn_silu_forward(lk_nn *nn, float *out, const float *inp, size_t n) {
  return forward(nn, SILU, out, inp, n, 0, 0);
}
int lk_nn_silu_backward(lk_nn *nn, float *dinp, const float *dout,
                        const float *inp, size_t n) {
  return backward(nn, SILU, dinp, dout, inp, n, 0, 0);
}
int lk_nn_leakyrelu_forward(lk_nn *nn, float *out, const float *inp, size_t n,
                            float negative_slope) {
  return forward(nn, LEAKYRELU, out, inp, n, negative_slope, 0);
}
int lk_nn_leakyrelu_backward(lk_nn *nn, float *dinp, const float *dout,
                             const float *inp, size_t n, float negative_slope) {
  return backward(nn, LEAKYRELU, dinp, dout, inp, n, negative_slope, 0);
}
int lk_nn_elu_forward(lk_nn *nn, float *out, const float *inp, size_t n,
                      float alpha) {
  return forward(nn, ELU, out, inp, n, alpha, 0);
}
int lk_nn_elu_backward(lk_nn *nn, float *dinp, const float *dout,
                       const float *inp, size_t n, float alpha) {
  return backward(nn, ELU, dinp, dout, inp, n, alpha, 0);
}

/* beta must be > 0: x / beta */
static int softplus_check(float beta, float threshold) {
  if (!(beta > 0) || !isfinite(beta) || isnan(threshold))
    return lk__err(LK_EINVAL,
                   "softplus: beta = %g, threshold = %g; expected beta > 0 "
                   "and finite, threshold a number",
                   (double)beta, (double)threshold);
  return 0;
}
int lk_nn_softplus_forward(lk_nn *nn, float *out, const float *inp, size_t n,
                           float beta, float threshold) {
  int rc = softplus_check(beta, threshold);
  return rc ? rc : forward(nn, SOFTPLUS, out, inp, n, beta, threshold);
}
int lk_nn_softplus_backward(lk_nn *nn, float *dinp, const float *dout,
                            const float *inp, size_t n, float beta,
                            float threshold) {
  int rc = softplus_check(beta, threshold);
  return rc ? rc : backward(nn, SOFTPLUS, dinp, dout, inp, n, beta, threshold);
}
int lk_nn_mish_forward(lk_nn *nn, float *out, const float *inp, size_t n) {
  return forward(nn, MISH, out, inp, n, 0, 0);
}
int lk_nn_mish_backward(lk_nn *nn, float *dinp, const float *dout,
                        const float *inp, size_t n) {
  return backward(nn, MISH, dinp, dout, inp, n, 0, 0);
}
int lk_nn_hardswish_forward(lk_nn *nn, float *out, const float *inp, size_t n) {
  return forward(nn, HARDSWISH, out, inp, n, 0, 0);
}
int lk_nn_hardswish_backward(lk_nn *nn, float *dinp, const float *dout,
                             const float *inp, size_t n) {
  return backward(nn, HARDSWISH, dinp, dout, inp, n, 0, 0);
}
int lk_nn_hardsigmoid_forward(lk_nn *nn, float *out, const float *inp,
                              size_t n) {
  return forward(nn, HARDSIGMOID, out, inp, n, 0, 0);
}
int lk_nn_hardsigmoid_backward(lk_nn *nn, float *dinp, const float *dout,
                               const float *inp, size_t n) {
  return backward(nn, HARDSIGMOID, dinp, dout, inp, n, 0, 0);
}

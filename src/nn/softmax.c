/* Softmax and log-softmax over one dimension of any tensor, as
 * F.softmax(x, dim) and F.log_softmax(x, dim), and their backwards.
 *   inp, out, dout, dinp [outer, D, inner]: the lines of D values at
 *   stride inner (one line per outer and inner index)
 * A line, from its maximum m: e = exp(x - m); softmax = e * (1 / sum e),
 * log_softmax = (x - m) - log1p(sum e - 1), sum e - 1 summed without
 * the maximum's 1: torch's x - (m + log sum e) but for the values near 0
 * (a line whose maximum dominates), which torch's rounding of sum e and
 * of m + log sum e loses and this keeps. Backwards from the output y:
 * softmax's dx += y (dy - sum dy y), log_softmax's dx += dy - e^y sum dy
 * (torch's softmax_backward_data, log_softmax_backward_data).
 * Lines are cut among tasks by the sizes alone, and a line is done by one
 * task: a line at stride inner > 1 is copied to the thread's scratch and
 * done as a contiguous one, the same code, so every line's result is the
 * same bits wherever it lies and at any thread count. */
#include <math.h>

#include "nn_internal.h"
#include "vmath.h"

#define GRAIN 8192 /* values per task at least */

typedef struct job {
  lk_nn *nn;
  bool log;
  int outer, D, inner, parts;
  float *out;
  const float *inp, *dout;
} job;

/* Y [D] from X [D]; E [D] scratch */
static void line_forward(const nn_kernels *k, bool log, float *y,
                         const float *x, float *e, size_t D) {
  float m = nn_max(x, D);
  if (!log) {
    k->exp_shift(y, x, m, D);
    float inv = 1 / nn_sum(y, D);
    for (size_t i = 0; i < D; i++)
      y[i] *= inv;
    return;
  }
  k->exp_shift(e, x, m, D);
  size_t a = 0;
  while (a < D && !(x[a] == m))
    a++;
  float c;
  if (a < D) { /* sum e = 1 + the others' sum: log1p of that, not log */
    e[a] = 0;
    c = log1pf(nn_sum(e, D));
  } else { /* a NaN maximum */
    c = logf(nn_sum(e, D));
  }
  for (size_t i = 0; i < D; i++)
    y[i] = (x[i] - m) - c;
}

/* DX [D] += the gradient from DY and Y [D]; E [D] scratch */
static void line_backward(const nn_kernels *k, bool log, float *dx,
                          const float *dy, const float *y, float *e, size_t D) {
  if (!log) {
    float s = nn_dot(dy, y, D);
    for (size_t i = 0; i < D; i++)
      dx[i] += y[i] * (dy[i] - s);
    return;
  }
  float s = nn_sum(dy, D);
  k->exp_shift(e, y, 0.0f, D);
  for (size_t i = 0; i < D; i++)
    dx[i] += dy[i] - e[i] * s;
}

/* The first value of line L and its stride. */
static size_t line_start(const job *j, size_t l) {
  size_t o = l / (size_t)j->inner, q = l % (size_t)j->inner;
  return o * (size_t)j->D * (size_t)j->inner + q;
}

static void forward_task(void *ctx, int task, int thread) {
  const job *j = ctx;
  size_t lo, hi, D = (size_t)j->D, st = (size_t)j->inner;
  nn__range((size_t)j->outer * st, j->parts, task, &lo, &hi);
  float *s = nn__scratch(j->nn, thread), *x = s + D, *y = s + 2 * D;
  for (size_t l = lo; l < hi; l++) {
    size_t a = line_start(j, l);
    if (st == 1) {
      line_forward(j->nn->k, j->log, j->out + a, j->inp + a, s, D);
      continue;
    }
    for (size_t i = 0; i < D; i++)
      x[i] = j->inp[a + i * st];
    line_forward(j->nn->k, j->log, y, x, s, D);
    for (size_t i = 0; i < D; i++)
      j->out[a + i * st] = y[i];
  }
}

static void backward_task(void *ctx, int task, int thread) {
  const job *j = ctx;
  size_t lo, hi, D = (size_t)j->D, st = (size_t)j->inner;
  nn__range((size_t)j->outer * st, j->parts, task, &lo, &hi);
  float *s = nn__scratch(j->nn, thread), *dx = s + D, *dy = s + 2 * D,
        *y = s + 3 * D;
  float *dinp = j->out;
  for (size_t l = lo; l < hi; l++) {
    size_t a = line_start(j, l);
    if (st == 1) {
      line_backward(j->nn->k, j->log, dinp + a, j->dout + a, j->inp + a, s, D);
      continue;
    }
    for (size_t i = 0; i < D; i++) {
      dx[i] = dinp[a + i * st];
      dy[i] = j->dout[a + i * st];
      y[i] = j->inp[a + i * st];
    }
    line_backward(j->nn->k, j->log, dx, dy, y, s, D);
    for (size_t i = 0; i < D; i++)
      dinp[a + i * st] = dx[i];
  }
}

static int run(lk_nn *nn, bool log, bool back, float *out, const float *inp,
               const float *dout, int outer, int D, int inner) {
  const char *name = log ? "log_softmax" : "softmax";
  if (!nn || !out || !inp || (back && !dout))
    return lk__err(LK_EINVAL, "%s: needs the context and every array", name);
  if (outer < 1 || D < 1 || inner < 1 ||
      nn__mul(nn__mul((size_t)outer, (size_t)D), (size_t)inner) > NN_MAX_FLOATS)
    return lk__err(LK_EINVAL,
                   "%s: sizes outer = %d, D = %d, inner = %d; expected >= 1",
                   name, outer, D, inner);
  int rc = nn__reserve(nn, name, 0, 4 * (size_t)D * sizeof(float));
  if (rc < 0)
    return rc;
  size_t lines = (size_t)outer * (size_t)inner;
  job j = {.nn = nn,
           .log = log,
           .outer = outer,
           .D = D,
           .inner = inner,
           .out = out,
           .inp = inp,
           .dout = dout,
           .parts = nn__parts(lines, (GRAIN + (size_t)D - 1) / (size_t)D)};
  nn__run(nn, j.parts, back ? backward_task : forward_task, &j);
  return 0;
}

int lk_nn_softmax_dim_forward(lk_nn *nn, float *out, const float *inp,
                              int outer, int D, int inner) {
  return run(nn, false, false, out, inp, NULL, outer, D, inner);
}
int lk_nn_softmax_dim_backward(lk_nn *nn, float *dinp, const float *dout,
                               const float *out, int outer, int D, int inner) {
  if (!dinp && nn && dout && out)
    return 0;
  return run(nn, false, true, dinp, out, dout, outer, D, inner);
}
int lk_nn_log_softmax_forward(lk_nn *nn, float *out, const float *inp,
                              int outer, int D, int inner) {
  return run(nn, true, false, out, inp, NULL, outer, D, inner);
}
int lk_nn_log_softmax_backward(lk_nn *nn, float *dinp, const float *dout,
                               const float *out, int outer, int D, int inner) {
  if (!dinp && nn && dout && out)
    return 0;
  return run(nn, true, true, dinp, out, dout, outer, D, inner);
}

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
 * task: lines at stride inner > 1 are copied to the thread's scratch, a
 * block of neighbours at a time, and done as contiguous ones, the same
 * code, so every line's result is the same bits wherever it lies and at
 * any thread count. */
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

/* Work is cut into units: a line when inner = 1, else a block of up to
 * BLOCK neighbouring lines (inner indices q0 .. q0 + w), copied to the
 * scratch a row of D per line, BLOCK values of a cache line at a time,
 * instead of one value per cache line a line at a time. */
#define BLOCK 16

static size_t blocks(const job *j) { /* per outer index */
  return ((size_t)j->inner + BLOCK - 1) / BLOCK;
}

static size_t units(const job *j) {
  return (size_t)j->outer * (j->inner == 1 ? 1 : blocks(j));
}

/* Unit U's first value, and its lines' count */
static size_t unit_start(const job *j, size_t u, size_t *w) {
  size_t D = (size_t)j->D, st = (size_t)j->inner;
  if (st == 1) {
    *w = 1;
    return u * D;
  }
  size_t o = u / blocks(j), q0 = u % blocks(j) * BLOCK;
  *w = st - q0 < BLOCK ? st - q0 : BLOCK;
  return o * D * st + q0;
}

/* rows [w][D] <- the block at A (stride st), and back */
static void gather(float *rows, const float *a, size_t w, size_t D, size_t st) {
  for (size_t i = 0; i < D; i++)
    for (size_t b = 0; b < w; b++)
      rows[b * D + i] = a[i * st + b];
}
static void scatter(float *a, const float *rows, size_t w, size_t D,
                    size_t st) {
  for (size_t i = 0; i < D; i++)
    for (size_t b = 0; b < w; b++)
      a[i * st + b] = rows[b * D + i];
}

static void forward_task(void *ctx, int task, int thread) {
  const job *j = ctx;
  size_t lo, hi, w, D = (size_t)j->D, st = (size_t)j->inner;
  nn__range(units(j), j->parts, task, &lo, &hi);
  float *e = nn__scratch(j->nn, thread), *x = e + D, *y = x + BLOCK * D;
  for (size_t u = lo; u < hi; u++) {
    size_t a = unit_start(j, u, &w);
    if (st == 1) {
      line_forward(j->nn->k, j->log, j->out + a, j->inp + a, e, D);
      continue;
    }
    gather(x, j->inp + a, w, D, st);
    for (size_t b = 0; b < w; b++)
      line_forward(j->nn->k, j->log, y + b * D, x + b * D, e, D);
    scatter(j->out + a, y, w, D, st);
  }
}

static void backward_task(void *ctx, int task, int thread) {
  const job *j = ctx;
  size_t lo, hi, w, D = (size_t)j->D, st = (size_t)j->inner;
  nn__range(units(j), j->parts, task, &lo, &hi);
  float *e = nn__scratch(j->nn, thread), *dx = e + D, *dy = dx + BLOCK * D,
        *y = dy + BLOCK * D;
  float *dinp = j->out;
  for (size_t u = lo; u < hi; u++) {
    size_t a = unit_start(j, u, &w);
    if (st == 1) {
      line_backward(j->nn->k, j->log, dinp + a, j->dout + a, j->inp + a, e, D);
      continue;
    }
    gather(dx, dinp + a, w, D, st);
    gather(dy, j->dout + a, w, D, st);
    gather(y, j->inp + a, w, D, st);
    for (size_t b = 0; b < w; b++)
      line_backward(j->nn->k, j->log, dx + b * D, dy + b * D, y + b * D, e, D);
    scatter(dinp + a, dx, w, D, st);
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
  /* e [D], then three blocks [BLOCK, D]: x, y or dx, dy, y */
  int rc =
      nn__reserve(nn, name, 0, (1 + 3 * BLOCK) * (size_t)D * sizeof(float));
  if (rc < 0)
    return rc;
  size_t per_unit = (size_t)D * (inner == 1      ? 1
                                 : inner < BLOCK ? (size_t)inner
                                                 : BLOCK);
  job j = {.nn = nn,
           .log = log,
           .outer = outer,
           .D = D,
           .inner = inner,
           .out = out,
           .inp = inp,
           .dout = dout,
           .parts = 1};
  j.parts = nn__parts(units(&j), (GRAIN + per_unit - 1) / per_unit);
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

/* Layer norm over the last dimension, as nn.LayerNorm(C) (llm.c's
 * layernorm_forward and layernorm_backward).
 *   inp, out [N, C]; weight, bias [C]; mean, rstd [N]
 * A row's statistics in f32 lanes (vmath.h's sums), mean then squared
 * deviations, as torch sums them in f32 too. The backward is one pass
 * over runs of rows: each row's dinp on its own, and each run's sums for
 * dweight and dbias over its rows in order, which the caller then adds in
 * run order (the runs are cut from the sizes only, never from the thread
 * count: the same sums at any thread count). */
#include <math.h>

#include "nn_internal.h"
#include "vmath.h"

#define LAYER "layernorm"
#define GRAIN 8192 /* values per task at least */

typedef struct job {
  int N, C, row_parts;
  float eps;
  float *out, *mean, *rstd, *dinp, *dweight, *dbias;
  float *partial; /* [row_parts][2][C]: each part's dweight, dbias sums */
  const float *inp, *weight, *bias, *dout, *cmean, *crstd;
} job;

static int check(int N, int C) {
  NN_CHECK(N >= 1 && C >= 1, LAYER, "sizes N = %d, C = %d; expected >= 1", N,
           C);
  return 0;
}

static void forward_task(void *ctx, int task, int thread) {
  (void)thread;
  const job *j = ctx;
  size_t lo, hi, C = (size_t)j->C;
  nn__range((size_t)j->N, j->row_parts, task, &lo, &hi);
  for (size_t i = lo; i < hi; i++) {
    const float *x = j->inp + i * C;
    float *y = j->out + i * C;
    float m = nn_sum(x, C) / (float)C;
    float r = (float)(1 / sqrt((double)nn_sumsq(x, m, C) / (double)C +
                               (double)j->eps));
    const float *w = j->weight, *b = j->bias;
    if (w && b) /* one loop each, so that each vectorizes */
      for (size_t c = 0; c < C; c++)
        y[c] = (x[c] - m) * r * w[c] + b[c];
    else
      for (size_t c = 0; c < C; c++)
        y[c] = (x[c] - m) * r * (w ? w[c] : 1) + (b ? b[c] : 0);
    j->mean[i] = m;
    j->rstd[i] = r;
  }
}

int lk_nn_layernorm_forward(lk_nn *nn, float *out, float *mean, float *rstd,
                            const float *inp, const float *weight,
                            const float *bias, int N, int C, float eps) {
  NN_CHECK(nn && out && mean && rstd && inp, LAYER,
           "forward needs the context, out, mean, rstd and inp");
  int rc = check(N, C);
  if (rc < 0)
    return rc;
  NN_CHECK(eps >= 0, LAYER, "eps is %g; expected >= 0", (double)eps);
  job j = {.N = N,
           .C = C,
           .eps = eps,
           .out = out,
           .mean = mean,
           .rstd = rstd,
           .inp = inp,
           .weight = weight,
           .bias = bias};
  j.row_parts = nn__parts((size_t)N, (GRAIN + (size_t)C - 1) / (size_t)C);
  nn__run(nn, j.row_parts, forward_task, &j);
  return 0;
}

/* Over a row: A = sum of d = weight dy, B = sum of d (x - m). */
static void row_sums(const float *x, const float *dy, const float *w, float m,
                     size_t C, float *sa, float *sb) {
  nn_vf a0 = nn_splat(0), a1 = a0, b0 = a0, b1 = a0, mv = nn_splat(m);
  size_t c = 0;
  for (; c + 2 * NN_W <= C; c += 2 * NN_W) {
    nn_vf d0 = nn_load(dy + c), d1 = nn_load(dy + c + NN_W);
    if (w) {
      d0 *= nn_load(w + c);
      d1 *= nn_load(w + c + NN_W);
    }
    a0 += d0;
    a1 += d1;
    b0 += d0 * (nn_load(x + c) - mv);
    b1 += d1 * (nn_load(x + c + NN_W) - mv);
  }
  float A = nn_lanes(a0, a1), B = nn_lanes(b0, b1);
  for (; c < C; c++) {
    float d = (w ? w[c] : 1) * dy[c];
    A += d;
    B += d * (x[c] - m);
  }
  *sa = A;
  *sb = B;
}

/* One pass over rows [lo, hi) of part TASK: dinp, and this part's sums
 * for dweight and dbias, (x - m) r dy and dy over its rows in order, into
 * its own slice of the workspace (PW, PB [C]). A pass over every row for
 * each block of columns, as this was, read x and dy from memory nine
 * times per call where the step had moved them out of cache. */
static void backward_task(void *ctx, int task, int thread) {
  (void)thread;
  const job *j = ctx;
  size_t lo, hi, C = (size_t)j->C;
  nn__range((size_t)j->N, j->row_parts, task, &lo, &hi);
  float *pw = j->partial ? j->partial + (size_t)task * 2 * C : NULL;
  float *pb = pw ? pw + C : NULL;
  if (pw)
    for (size_t c = 0; c < 2 * C; c++)
      pw[c] = 0;
  for (size_t i = lo; i < hi; i++) {
    const float *x = j->inp + i * C, *dy = j->dout + i * C, *w = j->weight;
    float m = j->cmean[i], r = j->crstd[i];
    if (j->dinp) {
      float *dx = j->dinp + i * C, A, B;
      row_sums(x, dy, w, m, C, &A, &B);
      /* the means of dnorm = weight dy and of dnorm * norm */
      float a = A / (float)C, b = B * r / (float)C;
      if (w)
        for (size_t c = 0; c < C; c++)
          dx[c] += (w[c] * dy[c] - a - (x[c] - m) * r * b) * r;
      else
        for (size_t c = 0; c < C; c++)
          dx[c] += (dy[c] - a - (x[c] - m) * r * b) * r;
    }
    if (pw)
      for (size_t c = 0; c < C; c++) {
        pw[c] += (x[c] - m) * r * dy[c];
        pb[c] += dy[c];
      }
  }
}

int lk_nn_layernorm_backward(lk_nn *nn, float *dinp, float *dweight,
                             float *dbias, const float *dout, const float *inp,
                             const float *weight, const float *mean,
                             const float *rstd, int N, int C) {
  NN_CHECK(nn && dout && inp && mean && rstd, LAYER,
           "backward needs the context, dout, inp, mean and rstd");
  int rc = check(N, C);
  if (rc < 0)
    return rc;
  if (!dinp && !dweight && !dbias)
    return 0;
  job j = {.N = N,
           .C = C,
           .dinp = dinp,
           .dweight = dweight,
           .dbias = dbias,
           .inp = inp,
           .weight = weight,
           .dout = dout,
           .cmean = mean,
           .crstd = rstd};
  j.row_parts = nn__parts((size_t)N, (GRAIN + (size_t)C - 1) / (size_t)C);
  if (dweight || dbias) {
    size_t bytes = (size_t)j.row_parts * 2 * (size_t)C * sizeof(float);
    if ((rc = nn__reserve(nn, LAYER, bytes, 0)) < 0)
      return rc;
    j.partial = nn__shared(nn);
  }
  nn__run(nn, j.row_parts, backward_task, &j);
  /* dweight and dbias: the parts' sums added in part order (the parts are
   * cut from N and C only: the same sums at any thread count) */
  for (int p = 0; p < j.row_parts && j.partial; p++) {
    const float *pw = j.partial + (size_t)p * 2 * (size_t)C, *pb = pw + C;
    if (dweight)
      for (int c = 0; c < C; c++)
        dweight[c] += pw[c];
    if (dbias)
      for (int c = 0; c < C; c++)
        dbias[c] += pb[c];
  }
  return 0;
}

/* Layer norm over the last dimension, as nn.LayerNorm(C) (llm.c's
 * layernorm_forward and layernorm_backward).
 *   inp, out [N, C]; weight, bias [C]; mean, rstd [N]
 * A row's statistics in f32 lanes (vmath.h's sums), mean then squared
 * deviations, as torch sums them in f32 too. The
 * backward is one job of two kinds of tasks: runs of rows for dinp (each
 * row on its own), and runs of columns for dweight and dbias, which sum
 * over every row in order (a sum is never split between threads). */
#include <math.h>

#include "nn_internal.h"
#include "vmath.h"

#define LAYER "layernorm"
#define GRAIN 8192 /* values per task at least */

typedef struct job {
  int N, C, row_parts, col_parts;
  float eps;
  float *out, *mean, *rstd, *dinp, *dweight, *dbias;
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

static void backward_rows(const job *j, int task) {
  size_t lo, hi, C = (size_t)j->C;
  nn__range((size_t)j->N, j->row_parts, task, &lo, &hi);
  for (size_t i = lo; i < hi; i++) {
    const float *x = j->inp + i * C, *dy = j->dout + i * C, *w = j->weight;
    float *dx = j->dinp + i * C;
    float m = j->cmean[i], r = j->crstd[i], A, B;
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
}

/* dweight[c] += (x - m) r dy and dbias[c] += dy over every row, in row
 * order, for the columns [LO, HI): each column's sum runs in one lane of a
 * register, and the block of CB columns in registers goes through all the
 * rows at once (the sums of the loop this replaces, which added row after
 * row into memory, bit for bit, at a quarter of its time). */
#define CB (4 * NN_W)

static void cols_block(const job *j, size_t c0) {
  nn_vf w[4], b[4];
  for (int k = 0; k < 4; k++) {
    w[k] = j->dweight ? nn_load(j->dweight + c0 + k * NN_W) : nn_splat(0);
    b[k] = j->dbias ? nn_load(j->dbias + c0 + k * NN_W) : nn_splat(0);
  }
  size_t C = (size_t)j->C;
  for (int i = 0; i < j->N; i++) {
    const float *x = j->inp + (size_t)i * C + c0;
    const float *dy = j->dout + (size_t)i * C + c0;
    nn_vf m = nn_splat(j->cmean[i]), r = nn_splat(j->crstd[i]);
    for (int k = 0; k < 4; k++) {
      nn_vf d = nn_load(dy + k * NN_W);
      w[k] += (nn_load(x + k * NN_W) - m) * r * d;
      b[k] += d;
    }
  }
  for (int k = 0; k < 4; k++) {
    if (j->dweight)
      nn_store(j->dweight + c0 + k * NN_W, w[k]);
    if (j->dbias)
      nn_store(j->dbias + c0 + k * NN_W, b[k]);
  }
}

static void backward_cols(const job *j, int task) {
  size_t lo, hi, C = (size_t)j->C;
  nn__range(C, j->col_parts, task, &lo, &hi);
  size_t c = lo;
  for (; c + CB <= hi; c += CB)
    cols_block(j, c);
  for (; c < hi; c++) { /* the same sums, one column at a time */
    float w = j->dweight ? j->dweight[c] : 0, b = j->dbias ? j->dbias[c] : 0;
    for (int i = 0; i < j->N; i++) {
      float d = j->dout[(size_t)i * C + c];
      w += (j->inp[(size_t)i * C + c] - j->cmean[i]) * j->crstd[i] * d;
      b += d;
    }
    if (j->dweight)
      j->dweight[c] = w;
    if (j->dbias)
      j->dbias[c] = b;
  }
}

static void backward_task(void *ctx, int task, int thread) {
  (void)thread;
  const job *j = ctx;
  if (task < j->col_parts)
    backward_cols(j, task);
  else
    backward_rows(j, task - j->col_parts);
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
  if (dinp)
    j.row_parts = nn__parts((size_t)N, (GRAIN + (size_t)C - 1) / (size_t)C);
  if (dweight || dbias) /* columns: at least 16 wide, a cache line */
    j.col_parts = nn__parts((size_t)C, 16) < 8 ? nn__parts((size_t)C, 16) : 8;
  nn__run(nn, j.col_parts + j.row_parts, backward_task, &j);
  return 0;
}

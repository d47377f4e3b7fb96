/* lstm: one direction of one layer of torch's nn.LSTM (batch_first), gate
 * order i, f, g, o:
 *   i, f, o = sigmoid(.), g = tanh(.) of x W_ih^T + b_ih + h W_hh^T + b_hh
 *   c' = f c + i g,  h' = o tanh(c')
 * The input's projection for all T steps is one product (the linear
 * kernel); the recurrent one is done step by step, each step cut into
 * blocks of batch rows by hidden units (rnn_steps.h). */
#include "rnn_steps.h"

#define LAYER "lstm"

typedef struct lstm_job {
  lk_nn *nn;
  rnn_grid grid;
  int N, T, H, ldh, t, tp; /* tp < 0: no previous step */
  float *h, *gates, *cell;
  const float *w_hh, *b_hh;
  /* backward */
  const float *dh;
  float *dg, *dhr, *dc;
  bool first; /* the first step of the backward: no gradient from later */
} lstm_job;

static void forward_task(void *ctx, int task, int thread) {
  (void)thread;
  lstm_job *j = ctx;
  int r0, r1, u0, u1, H = j->H, T = j->T;
  rnn_block(&j->grid, j->N, H, task, &r0, &r1, &u0, &u1);
  size_t G = 4 * (size_t)H;
  float *gates = j->gates + ((size_t)r0 * T + j->t) * G;
  if (j->tp >= 0)
    for (int q = 0; q < 4; q++) /* gates[., q H + u] += h_prev W_hh^T */
      nn__gemm1(j->nn, false, true, r1 - r0, u1 - u0, H, 1.0f,
                j->h + ((size_t)r0 * T + j->tp) * j->ldh, T * j->ldh,
                j->w_hh + ((size_t)q * H + u0) * H, H, 1.0f,
                gates + (size_t)q * H + u0, (int)(T * G));
  for (int n = r0; n < r1; n++) {
    float *g = j->gates + ((size_t)n * T + j->t) * G;
    float *c = j->cell + ((size_t)n * T + j->t) * H;
    const float *cp = j->tp >= 0 ? j->cell + ((size_t)n * T + j->tp) * H : NULL;
    float *h = j->h + ((size_t)n * T + j->t) * j->ldh;
    for (int u = u0; u < u1; u++) {
      float b[4] = {0, 0, 0, 0};
      for (int q = 0; j->b_hh && q < 4; q++)
        b[q] = j->b_hh[q * H + u];
      float ig = rnn_sigmoid(g[u] + b[0]);
      float fg = rnn_sigmoid(g[H + u] + b[1]);
      float gg = tanhf(g[2 * H + u] + b[2]);
      float og = rnn_sigmoid(g[3 * H + u] + b[3]);
      g[u] = ig, g[H + u] = fg, g[2 * H + u] = gg, g[3 * H + u] = og;
      c[u] = fg * (cp ? cp[u] : 0.0f) + ig * gg;
      h[u] = og * tanhf(c[u]);
    }
  }
}

int lk_nn_lstm_forward(lk_nn *nn, float *h, int ldh, float *gates, float *cell,
                       const float *x, const float *w_ih, const float *w_hh,
                       const float *b_ih, const float *b_hh, int N, int T,
                       int C, int H, bool reverse) {
  NN_NEED(nn, LAYER, h);
  NN_NEED(nn, LAYER, gates);
  NN_NEED(nn, LAYER, cell);
  NN_NEED(nn, LAYER, x);
  NN_NEED(nn, LAYER, w_ih);
  NN_NEED(nn, LAYER, w_hh);
  int rc = rnn_check(LAYER, N, T, C, H, 4, ldh);
  if (rc < 0 || (rc = lk_nn_linear_forward(nn, gates, x, w_ih, b_ih, N * T, C,
                                           4 * H)) < 0)
    return rc;
  lstm_job j = {.nn = nn,
                .grid = rnn_grid_of(N, H),
                .N = N,
                .T = T,
                .H = H,
                .ldh = ldh,
                .h = h,
                .gates = gates,
                .cell = cell,
                .w_hh = w_hh,
                .b_hh = b_hh};
  for (int s = 0; s < T; s++) {
    j.t = reverse ? T - 1 - s : s;
    j.tp = s == 0 ? -1 : (reverse ? j.t + 1 : j.t - 1);
    nn__run(nn, j.grid.row_parts * j.grid.unit_parts, forward_task, &j);
  }
  return 0;
}

/* The step's pre-activation gradients dg from dh (the output's and the
 * next step's) and dc (the next step's), then dc for the step before. */
static void gates_task(void *ctx, int task, int thread) {
  (void)thread;
  lstm_job *j = ctx;
  int r0, r1, u0, u1, H = j->H, T = j->T;
  rnn_block(&j->grid, j->N, H, task, &r0, &r1, &u0, &u1);
  size_t G = 4 * (size_t)H;
  for (int n = r0; n < r1; n++) {
    size_t at = (size_t)n * T + j->t;
    const float *g = j->gates + at * G, *c = j->cell + at * H;
    const float *cp = j->tp >= 0 ? j->cell + ((size_t)n * T + j->tp) * H : NULL;
    const float *dy = j->dh + at * j->ldh;
    float *dg = j->dg + at * G, *dhr = j->dhr + (size_t)n * H,
          *dc = j->dc + (size_t)n * H;
    for (int u = u0; u < u1; u++) {
      float ig = g[u], fg = g[H + u], gg = g[2 * H + u], og = g[3 * H + u];
      float dh = dy[u] + (j->first ? 0.0f : dhr[u]);
      float tc = tanhf(c[u]);
      float dct = (j->first ? 0.0f : dc[u]) + dh * og * (1 - tc * tc);
      dg[u] = dct * gg * ig * (1 - ig);
      dg[H + u] = dct * (cp ? cp[u] : 0.0f) * fg * (1 - fg);
      dg[2 * H + u] = dct * ig * (1 - gg * gg);
      dg[3 * H + u] = dh * tc * og * (1 - og);
      dc[u] = dct * fg;
    }
  }
}

/* dhr = the step's dg W_hh: the gradient reaching the previous step's h */
static void recur_task(void *ctx, int task, int thread) {
  (void)thread;
  lstm_job *j = ctx;
  int r0, r1, u0, u1, H = j->H, T = j->T;
  rnn_block(&j->grid, j->N, H, task, &r0, &r1, &u0, &u1);
  nn__gemm1(j->nn, false, false, r1 - r0, u1 - u0, 4 * H, 1.0f,
            j->dg + ((size_t)r0 * T + j->t) * 4 * H, 4 * H * T, j->w_hh + u0, H,
            0.0f, j->dhr + (size_t)r0 * H + u0, H);
}

int lk_nn_lstm_backward(lk_nn *nn, float *dx, float *dw_ih, float *dw_hh,
                        float *db_ih, float *db_hh, const float *dh, int ldh,
                        const float *x, const float *h, const float *gates,
                        const float *cell, const float *w_ih, const float *w_hh,
                        int N, int T, int C, int H, bool reverse) {
  NN_NEED(nn, LAYER, dh);
  NN_NEED(nn, LAYER, x);
  NN_NEED(nn, LAYER, h);
  NN_NEED(nn, LAYER, gates);
  NN_NEED(nn, LAYER, cell);
  NN_NEED(nn, LAYER, w_ih);
  NN_NEED(nn, LAYER, w_hh);
  int rc = rnn_check(LAYER, N, T, C, H, 4, ldh);
  if (rc < 0)
    return rc;
  size_t rows = (size_t)N * T, G = 4 * (size_t)H;
  size_t floats = rows * G + rows * H + 2 * (size_t)N * H;
  if ((rc = nn__reserve(nn, LAYER, nn__mul(floats, sizeof(float)), 0)) < 0)
    return rc;
  float *dg = nn__shared(nn), *hp = dg + rows * G, *dhr = hp + rows * H,
        *dc = dhr + (size_t)N * H;
  lstm_job j = {.nn = nn,
                .grid = rnn_grid_of(N, H),
                .N = N,
                .T = T,
                .H = H,
                .ldh = ldh,
                .gates = (float *)gates,
                .cell = (float *)cell,
                .w_hh = w_hh,
                .dh = dh,
                .dg = dg,
                .dhr = dhr,
                .dc = dc};
  int tasks = j.grid.row_parts * j.grid.unit_parts;
  for (int s = T - 1; s >= 0; s--) { /* the forward's steps, backwards */
    j.t = reverse ? T - 1 - s : s;
    j.tp = s == 0 ? -1 : (reverse ? j.t + 1 : j.t - 1);
    j.first = s == T - 1;
    nn__run(nn, tasks, gates_task, &j);
    if (s > 0)
      nn__run(nn, tasks, recur_task, &j);
  }
  rnn_previous(hp, h, ldh, N, T, H, reverse);
  if ((rc = lk_nn_linear_backward(nn, dx, dw_ih, db_ih, dg, x, w_ih, N * T, C,
                                  4 * H)) < 0)
    return rc;
  if (!dw_hh && !db_hh)
    return 0;
  return lk_nn_linear_backward(nn, NULL, dw_hh, db_hh, dg, hp, w_hh, N * T, H,
                               4 * H);
}

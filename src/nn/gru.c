/* gru: one direction of one layer of torch's nn.GRU (batch_first), gate
 * order r, z, n:
 *   r, z = sigmoid(x W_i^T + b_i + h W_h^T + b_h) of their rows
 *   n = tanh(x W_in^T + b_in + r (h W_hn^T + b_hn)),  h' = (1 - z) n + z h
 * The input's projection for all T steps is one product (the linear
 * kernel); the recurrent one is done step by step, each step cut into
 * blocks of batch rows by hidden units (rnn_steps.h). */
#include "rnn_steps.h"

#define LAYER "gru"

typedef struct gru_job {
  lk_nn *nn;
  rnn_grid grid;
  int N, T, H, ldh, t, tp, block; /* block: a task's scratch, floats */
  float *h, *gates, *hn;
  const float *w_hh, *b_hh;
  /* backward */
  const float *dh;
  float *dgx, *dgh, *dhr, *dzh;
  bool first;
} gru_job;

static void forward_task(void *ctx, int task, int thread) {
  gru_job *j = ctx;
  int r0, r1, u0, u1, H = j->H, T = j->T;
  rnn_block(&j->grid, j->N, H, task, &r0, &r1, &u0, &u1);
  int w = u1 - u0;
  float *s = nn__scratch(j->nn, thread); /* [rows, 3 w]: h_prev W_hh^T */
  size_t G = 3 * (size_t)H;
  if (j->tp >= 0)
    for (int q = 0; q < 3; q++)
      nn__gemm1(j->nn, false, true, r1 - r0, w, H, 1.0f,
                j->h + ((size_t)r0 * T + j->tp) * j->ldh, T * j->ldh,
                j->w_hh + ((size_t)q * H + u0) * H, H, 0.0f, s + q * w, 3 * w);
  else
    memset(s, 0, (size_t)(r1 - r0) * 3 * w * sizeof(float));
  for (int n = r0; n < r1; n++) {
    size_t at = (size_t)n * T + j->t;
    float *g = j->gates + at * G, *hn = j->hn + at * H;
    float *h = j->h + at * j->ldh, *sr = s + (size_t)(n - r0) * 3 * w;
    const float *hp =
        j->tp >= 0 ? j->h + ((size_t)n * T + j->tp) * j->ldh : NULL;
    for (int u = u0; u < u1; u++) {
      float b[3] = {0, 0, 0};
      for (int q = 0; j->b_hh && q < 3; q++)
        b[q] = j->b_hh[q * H + u];
      float r = rnn_sigmoid(g[u] + (sr[u - u0] + b[0]));
      float z = rnn_sigmoid(g[H + u] + (sr[w + u - u0] + b[1]));
      float hnu = sr[2 * w + u - u0] + b[2];
      float nu = tanhf(g[2 * H + u] + r * hnu);
      g[u] = r, g[H + u] = z, g[2 * H + u] = nu, hn[u] = hnu;
      h[u] = (1 - z) * nu + z * (hp ? hp[u] : 0.0f);
    }
  }
}

int lk_nn_gru_forward(lk_nn *nn, float *h, int ldh, float *gates, float *hn,
                      const float *x, const float *w_ih, const float *w_hh,
                      const float *b_ih, const float *b_hh, int N, int T, int C,
                      int H, bool reverse) {
  NN_NEED(nn, LAYER, h);
  NN_NEED(nn, LAYER, gates);
  NN_NEED(nn, LAYER, hn);
  NN_NEED(nn, LAYER, x);
  NN_NEED(nn, LAYER, w_ih);
  NN_NEED(nn, LAYER, w_hh);
  int rc = rnn_check(LAYER, N, T, C, H, 3, ldh);
  if (rc < 0)
    return rc;
  gru_job j = {.nn = nn,
               .grid = rnn_grid_of(N, H),
               .N = N,
               .T = T,
               .H = H,
               .ldh = ldh,
               .h = h,
               .gates = gates,
               .hn = hn,
               .w_hh = w_hh,
               .b_hh = b_hh};
  /* a block's rows and units: at most a part's share rounded up */
  size_t rows = (size_t)N / (size_t)j.grid.row_parts + 1;
  size_t units = (size_t)H / (size_t)j.grid.unit_parts + 1;
  if ((rc = nn__reserve(nn, LAYER, 0,
                        nn__mul(rows * 3 * units, sizeof(float)))) < 0 ||
      (rc = lk_nn_linear_forward(nn, gates, x, w_ih, b_ih, N * T, C, 3 * H)) <
          0)
    return rc;
  for (int s = 0; s < T; s++) {
    j.t = reverse ? T - 1 - s : s;
    j.tp = s == 0 ? -1 : (reverse ? j.t + 1 : j.t - 1);
    nn__run(nn, j.grid.row_parts * j.grid.unit_parts, forward_task, &j);
  }
  return 0;
}

/* The step's gradients of the input's pre-activations dgx and of the
 * recurrent ones dgh, from dh (the output's and the next step's); dzh the
 * part of h_prev's gradient through z h_prev. */
static void gates_task(void *ctx, int task, int thread) {
  (void)thread;
  gru_job *j = ctx;
  int r0, r1, u0, u1, H = j->H, T = j->T;
  rnn_block(&j->grid, j->N, H, task, &r0, &r1, &u0, &u1);
  size_t G = 3 * (size_t)H;
  for (int n = r0; n < r1; n++) {
    size_t at = (size_t)n * T + j->t;
    const float *g = j->gates + at * G, *hn = j->hn + at * H;
    const float *hp =
        j->tp >= 0 ? j->h + ((size_t)n * T + j->tp) * j->ldh : NULL;
    const float *dy = j->dh + at * j->ldh;
    float *dgx = j->dgx + at * G, *dgh = j->dgh + at * G,
          *dhr = j->dhr + (size_t)n * H, *dzh = j->dzh + (size_t)n * H;
    for (int u = u0; u < u1; u++) {
      float r = g[u], z = g[H + u], nu = g[2 * H + u];
      float dh = dy[u] + (j->first ? 0.0f : dhr[u]);
      float dn = dh * (1 - z) * (1 - nu * nu);
      float dr = dn * hn[u] * r * (1 - r);
      float dz = dh * ((hp ? hp[u] : 0.0f) - nu) * z * (1 - z);
      dgx[u] = dgh[u] = dr;
      dgx[H + u] = dgh[H + u] = dz;
      dgx[2 * H + u] = dn;
      dgh[2 * H + u] = dn * r;
      dzh[u] = dh * z;
    }
  }
}

/* dhr = the step's dgh W_hh + dzh: the gradient reaching h_prev */
static void recur_task(void *ctx, int task, int thread) {
  (void)thread;
  gru_job *j = ctx;
  int r0, r1, u0, u1, H = j->H, T = j->T;
  rnn_block(&j->grid, j->N, H, task, &r0, &r1, &u0, &u1);
  nn__gemm1(j->nn, false, false, r1 - r0, u1 - u0, 3 * H, 1.0f,
            j->dgh + ((size_t)r0 * T + j->t) * 3 * H, 3 * H * T, j->w_hh + u0,
            H, 0.0f, j->dhr + (size_t)r0 * H + u0, H);
  for (int n = r0; n < r1; n++)
    for (int u = u0; u < u1; u++)
      j->dhr[(size_t)n * H + u] += j->dzh[(size_t)n * H + u];
}

int lk_nn_gru_backward(lk_nn *nn, float *dx, float *dw_ih, float *dw_hh,
                       float *db_ih, float *db_hh, const float *dh, int ldh,
                       const float *x, const float *h, const float *gates,
                       const float *hn, const float *w_ih, const float *w_hh,
                       int N, int T, int C, int H, bool reverse) {
  NN_NEED(nn, LAYER, dh);
  NN_NEED(nn, LAYER, x);
  NN_NEED(nn, LAYER, h);
  NN_NEED(nn, LAYER, gates);
  NN_NEED(nn, LAYER, hn);
  NN_NEED(nn, LAYER, w_ih);
  NN_NEED(nn, LAYER, w_hh);
  int rc = rnn_check(LAYER, N, T, C, H, 3, ldh);
  if (rc < 0)
    return rc;
  size_t rows = (size_t)N * T, G = 3 * (size_t)H;
  size_t floats = 2 * rows * G + rows * H + 2 * (size_t)N * H;
  if ((rc = nn__reserve(nn, LAYER, nn__mul(floats, sizeof(float)), 0)) < 0)
    return rc;
  float *dgx = nn__shared(nn), *dgh = dgx + rows * G, *hp = dgh + rows * G,
        *dhr = hp + rows * H, *dzh = dhr + (size_t)N * H;
  gru_job j = {.nn = nn,
               .grid = rnn_grid_of(N, H),
               .N = N,
               .T = T,
               .H = H,
               .ldh = ldh,
               .h = (float *)h,
               .gates = (float *)gates,
               .hn = (float *)hn,
               .w_hh = w_hh,
               .dh = dh,
               .dgx = dgx,
               .dgh = dgh,
               .dhr = dhr,
               .dzh = dzh};
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
  if ((rc = lk_nn_linear_backward(nn, dx, dw_ih, db_ih, dgx, x, w_ih, N * T, C,
                                  3 * H)) < 0)
    return rc;
  if (!dw_hh && !db_hh)
    return 0;
  return lk_nn_linear_backward(nn, NULL, dw_hh, db_hh, dgh, hp, w_hh, N * T, H,
                               3 * H);
}

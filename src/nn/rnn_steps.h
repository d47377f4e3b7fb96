/* Private to the recurrent kernels (lstm.c, gru.c): how one time step's
 * work is cut into tasks, and the checks they share. A step is cut into
 * blocks of batch rows by blocks of hidden units, their number a function
 * of the sizes only (never of the thread count), and a task does a whole
 * block, its products included: so the results are the same bits at any
 * thread count. */
#ifndef LK_NN_RNN_STEPS_H
#define LK_NN_RNN_STEPS_H

#include <limits.h>
#include <math.h>
#include <string.h>

#include "nn_internal.h"

#define RNN_ROW_GRAIN 4   /* batch rows a task takes at least */
#define RNN_UNIT_GRAIN 64 /* hidden units a task takes at least */

typedef struct rnn_grid {
  int row_parts, unit_parts;
} rnn_grid;

static inline rnn_grid rnn_grid_of(int N, int H) {
  rnn_grid g = {nn__parts((size_t)N, RNN_ROW_GRAIN),
                nn__parts((size_t)H, RNN_UNIT_GRAIN)};
  return g;
}

/* Task TASK's rows [*r0, *r1) and units [*u0, *u1). */
static inline void rnn_block(const rnn_grid *g, int N, int H, int task, int *r0,
                             int *r1, int *u0, int *u1) {
  size_t lo, hi;
  nn__range((size_t)N, g->row_parts, task / g->unit_parts, &lo, &hi);
  *r0 = (int)lo, *r1 = (int)hi;
  nn__range((size_t)H, g->unit_parts, task % g->unit_parts, &lo, &hi);
  *u0 = (int)lo, *u1 = (int)hi;
}

static inline float rnn_sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

/* The sizes of a kernel: all >= 1, LDH >= H, and every array of
 * N * T * (G * H or C or LDH) floats indexable by an int product. */
static inline int rnn_check(const char *layer, int N, int T, int C, int H,
                            int G, int ldh) {
  if (N < 1 || T < 1 || C < 1 || H < 1 || ldh < H)
    return lk__err(LK_EINVAL,
                   "%s: sizes N = %d, T = %d, C = %d, H = %d, ldh = %d; "
                   "expected >= 1 and ldh >= H",
                   layer, N, T, C, H, ldh);
  size_t rows = nn__mul((size_t)N, (size_t)T);
  size_t widest = (size_t)G * (size_t)H;
  if ((size_t)C > widest)
    widest = (size_t)C;
  if ((size_t)ldh > widest)
    widest = (size_t)ldh;
  if (nn__mul(rows, widest) > (size_t)INT_MAX)
    return lk__err(LK_EINVAL, "%s: N * T = %zu rows of %zu values: too large",
                   layer, rows, widest);
  return 0;
}

/* hp [N, T, H]: the state each step started from, h [N, T, ldh] one step
 * back in the direction of the run (zeros at the first step). */
static inline void rnn_previous(float *hp, const float *h, int ldh, int N,
                                int T, int H, bool reverse) {
  for (int n = 0; n < N; n++)
    for (int t = 0; t < T; t++) {
      int tp = reverse ? t + 1 : t - 1;
      float *d = hp + ((size_t)n * T + t) * H;
      if (tp < 0 || tp >= T)
        memset(d, 0, (size_t)H * sizeof(float));
      else
        memcpy(d, h + ((size_t)n * T + tp) * ldh, (size_t)H * sizeof(float));
    }
}

#endif

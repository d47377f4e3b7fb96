/* Residual connections: out = a + b, and the gradient into both branches.
 *   a, b, out, dout, da, db [n] */
#include "nn_internal.h"

#define LAYER "residual"
#define GRAIN 16384

typedef struct job {
  size_t n;
  int parts;
  float *out, *da, *db;
  const float *a, *b, *dout;
} job;

static void forward_task(void *ctx, int task, int thread) {
  (void)thread;
  const job *j = ctx;
  size_t lo, hi;
  nn__range16(j->n, j->parts, task, &lo, &hi);
  for (size_t i = lo; i < hi; i++)
    j->out[i] = j->a[i] + j->b[i];
}

static void backward_task(void *ctx, int task, int thread) {
  (void)thread;
  const job *j = ctx;
  size_t lo, hi;
  nn__range16(j->n, j->parts, task, &lo, &hi);
  if (j->da)
    for (size_t i = lo; i < hi; i++)
      j->da[i] += j->dout[i];
  if (j->db)
    for (size_t i = lo; i < hi; i++)
      j->db[i] += j->dout[i];
}

int lk_nn_residual_forward(lk_nn *nn, float *out, const float *a,
                           const float *b, size_t n) {
  NN_CHECK(nn && out && a && b, LAYER,
           "forward needs the context, out, a and b");
  NN_CHECK(n >= 1, LAYER, "n = 0 values; expected >= 1");
  job j = {.n = n, .out = out, .a = a, .b = b, .parts = nn__parts(n, GRAIN)};
  nn__run(nn, j.parts, forward_task, &j);
  return 0;
}

int lk_nn_residual_backward(lk_nn *nn, float *da, float *db, const float *dout,
                            size_t n) {
  NN_CHECK(nn && dout, LAYER, "backward needs the context and dout");
  NN_CHECK(n >= 1, LAYER, "n = 0 values; expected >= 1");
  NN_CHECK(da != db || !da, LAYER, "da and db are the same array");
  if (!da && !db)
    return 0;
  job j = {
      .n = n, .da = da, .db = db, .dout = dout, .parts = nn__parts(n, GRAIN)};
  nn__run(nn, j.parts, backward_task, &j);
  return 0;
}

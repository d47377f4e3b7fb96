/* Embedding lookup, as nn.Embedding.
 *   idx [N] (int32), table [V, C], out [N, C]
 * Every index is checked before anything is written, so a bad batch fails
 * whole. The backward's tasks are runs of the C columns: each one walks
 * all N indices in order, so repeated indices add up in order of i and
 * no two threads write the same row of dtable. */
#include <string.h>

#include "nn_internal.h"

#define LAYER "embedding"
#define GRAIN 8192 /* values per task at least */

typedef struct job {
  int N, V, C, parts;
  float *out;
  const float *table, *dout;
  const int32_t *idx;
} job;

static int check(const int32_t *idx, int N, int V, int C) {
  NN_CHECK(N >= 1 && V >= 1 && C >= 1, LAYER,
           "sizes N = %d, V = %d, C = %d; expected >= 1", N, V, C);
  for (int i = 0; i < N; i++)
    NN_CHECK(idx[i] >= 0 && idx[i] < V, LAYER,
             "index %d at position %d is out of range: the table has %d rows "
             "(0 to %d)",
             (int)idx[i], i, V, V - 1);
  return 0;
}

static void forward_task(void *ctx, int task, int thread) {
  (void)thread;
  const job *j = ctx;
  size_t lo, hi;
  nn__range((size_t)j->N, j->parts, task, &lo, &hi);
  for (size_t i = lo; i < hi; i++)
    memcpy(j->out + i * (size_t)j->C, j->table + (size_t)j->idx[i] * j->C,
           (size_t)j->C * sizeof(float));
}

static void backward_task(void *ctx, int task, int thread) {
  (void)thread;
  const job *j = ctx;
  size_t lo, hi;
  nn__range16((size_t)j->C, j->parts, task, &lo, &hi);
  for (int i = 0; i < j->N; i++) {
    float *row = j->out + (size_t)j->idx[i] * j->C;
    const float *d = j->dout + (size_t)i * j->C;
    for (size_t c = lo; c < hi; c++)
      row[c] += d[c];
  }
}

int lk_nn_embedding_forward(lk_nn *nn, float *out, const int32_t *idx,
                            const float *table, int N, int V, int C) {
  NN_CHECK(nn && out && idx && table, LAYER,
           "forward needs the context, out, idx and table");
  int rc = check(idx, N, V, C);
  if (rc < 0)
    return rc;
  job j = {.N = N, .V = V, .C = C, .out = out, .table = table, .idx = idx};
  j.parts = nn__parts((size_t)N, (GRAIN + (size_t)C - 1) / (size_t)C);
  nn__run(nn, j.parts, forward_task, &j);
  return 0;
}

int lk_nn_embedding_backward(lk_nn *nn, float *dtable, const float *dout,
                             const int32_t *idx, int N, int V, int C) {
  NN_CHECK(nn && dout && idx, LAYER,
           "backward needs the context, dout and idx");
  int rc = check(idx, N, V, C);
  if (rc < 0 || !dtable)
    return rc;
  job j = {.N = N, .V = V, .C = C, .out = dtable, .dout = dout, .idx = idx};
  /* columns in runs of 16 at least, and enough values per task */
  size_t per = (GRAIN + (size_t)N - 1) / (size_t)N;
  j.parts = nn__parts((size_t)C, per > 16 ? per : 16);
  nn__run(nn, j.parts, backward_task, &j);
  return 0;
}

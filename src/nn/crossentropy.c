/* Softmax, and softmax cross-entropy with its backward fused in one pass,
 * as F.softmax(dim=-1) and F.cross_entropy (mean reduction).
 *   logits, probs, dlogits [N, V], targets [N]
 * Each row from its maximum: e = exp(z - max), softmax = e * (1 / sum e),
 * -log softmax(z)[y] = max + log(sum e) - z[y] (torch's log_softmax). The
 * loss of each row goes to the workspace and the rows are summed in order
 * on the caller's thread: the mean does not depend on how rows were cut. */
#include <math.h>

#include "nn_internal.h"
#include "vmath.h"

#define GRAIN 8192 /* values per task at least */

typedef struct job {
  const nn_kernels *k;
  int N, V, parts;
  float g; /* dloss / N */
  float *probs, *dlogits;
  const float *logits;
  const int32_t *targets;
  double *losses;
  uint8_t *hits;
} job;

static int row_parts(int N, int V) {
  return nn__parts((size_t)N, (GRAIN + (size_t)V - 1) / (size_t)V);
}

/* The first index of z's maximum (nn_max's: a NaN is never the maximum
 * unless it is z[0], and the row's sum is NaN then anyway). */
static int argmax(const float *z, int V) {
  float m = nn_max(z, (size_t)V);
  if (!(m > z[0]))
    return 0;
  int a = 1;
  while (z[a] != m)
    a++;
  return a;
}

/* e [V] = exp(z - max z); returns sum e (vmath.h's order) and sets *arg to
 * the first max. */
static float exps(const nn_kernels *k, const float *z, float *e, int V,
                  int *arg) {
  int a = argmax(z, V);
  k->exp_shift(e, z, z[a], (size_t)V);
  *arg = a;
  return nn_sum(e, (size_t)V);
}

static void softmax_task(void *ctx, int task, int thread) {
  (void)thread;
  const job *j = ctx;
  size_t lo, hi;
  nn__range((size_t)j->N, j->parts, task, &lo, &hi);
  for (size_t i = lo; i < hi; i++) {
    float *p = j->probs + i * (size_t)j->V;
    int arg;
    float inv = 1 / exps(j->k, j->logits + i * (size_t)j->V, p, j->V, &arg);
    for (int k = 0; k < j->V; k++)
      p[k] *= inv;
  }
}

int lk_nn_softmax_forward(lk_nn *nn, float *probs, const float *logits, int N,
                          int V) {
  NN_CHECK(nn && probs && logits, "softmax",
           "needs the context, probs and logits");
  NN_CHECK(N >= 1 && V >= 1, "softmax", "sizes N = %d, V = %d; expected >= 1",
           N, V);
  job j = {.k = nn->k,
           .N = N,
           .V = V,
           .probs = probs,
           .logits = logits,
           .parts = row_parts(N, V)};
  nn__run(nn, j.parts, softmax_task, &j);
  return 0;
}

static void xent_task(void *ctx, int task, int thread) {
  (void)thread;
  const job *j = ctx;
  size_t lo, hi;
  nn__range((size_t)j->N, j->parts, task, &lo, &hi);
  for (size_t i = lo; i < hi; i++) {
    const float *z = j->logits + i * (size_t)j->V;
    int y = j->targets[i], arg;
    float *d = j->dlogits ? j->dlogits + i * (size_t)j->V : NULL;
    float e[256], sum;
    if (d && j->V <= 256) {
      sum = exps(j->k, z, e, j->V, &arg);
      float s = j->g / sum;
      /* d[k] += e[k] s, and e[y] s - g at y: the loops vectorize */
      for (int k = 0; k < y; k++)
        d[k] += e[k] * s;
      d[y] += e[y] * s - j->g;
      for (int k = y + 1; k < j->V; k++)
        d[k] += e[k] * s;
    } else {
      /* rows too long for the stack: sum in blocks, then again for d */
      arg = argmax(z, j->V);
      float m = z[arg];
      sum = 0;
      for (int k0 = 0; k0 < j->V; k0 += 256) {
        int w = j->V - k0 < 256 ? j->V - k0 : 256;
        j->k->exp_shift(e, z + k0, m, (size_t)w);
        sum += nn_sum(e, (size_t)w);
      }
      if (d) {
        float s = j->g / sum;
        for (int k0 = 0; k0 < j->V; k0 += 256) {
          int w = j->V - k0 < 256 ? j->V - k0 : 256;
          j->k->exp_shift(e, z + k0, m, (size_t)w);
          for (int k = 0; k < w; k++)
            d[k0 + k] += e[k] * s - (k0 + k == y ? j->g : 0);
        }
      }
    }
    j->losses[i] = (double)z[arg] + log((double)sum) - z[y];
    j->hits[i] = arg == y;
  }
}

int lk_nn_crossentropy(lk_nn *nn, double *loss, float *dlogits,
                       const float *logits, const int32_t *targets, int N,
                       int V, float dloss, int *correct) {
  NN_CHECK(nn && loss && logits && targets, "crossentropy",
           "needs the context, loss, logits and targets");
  NN_CHECK(N >= 1 && V >= 1, "crossentropy",
           "sizes N = %d, V = %d; expected >= 1", N, V);
  for (int i = 0; i < N; i++)
    NN_CHECK(targets[i] >= 0 && targets[i] < V, "crossentropy",
             "target %d of row %d is out of range: there are %d classes (0 "
             "to %d)",
             (int)targets[i], i, V, V - 1);
  size_t bytes = (size_t)N * (sizeof(double) + 1);
  int rc = nn__reserve(nn, "crossentropy", bytes, 0);
  if (rc < 0)
    return rc;
  job j = {.k = nn->k,
           .N = N,
           .V = V,
           .g = dloss / (float)N,
           .dlogits = dlogits,
           .logits = logits,
           .targets = targets,
           .losses = nn__shared(nn),
           .parts = row_parts(N, V)};
  j.hits = (uint8_t *)(j.losses + N);
  nn__run(nn, j.parts, xent_task, &j);
  double s = 0;
  int hits = 0;
  for (int i = 0; i < N; i++) {
    s += j.losses[i];
    hits += j.hits[i];
  }
  *loss = s / N;
  if (correct)
    *correct = hits;
  return 0;
}

/* The losses beyond plain cross-entropy, as torch's functional forms with
 * mean reduction: cross-entropy with class weights and label smoothing,
 * nll, mse, l1, smooth_l1, huber and binary cross-entropy on logits.
 * Each computes its value in double and, given a gradient array, adds
 * dloss times its gradient. Work is cut in parts by sizes only (never by
 * the thread count); each part's sum goes to the workspace and the parts
 * are summed in order on the caller's thread: the same bits at any
 * thread count. */
#include <math.h>

#include "nn_internal.h"

#define GRAIN 8192 /* values per task at least */

/* ---- elementwise losses ------------------------------------------------- */

/* The loss of one value X against target T, its derivative into *G; A is
 * the loss's parameter (beta, delta, or the column's pos_weight). */
typedef double (*elem_fn)(double x, double t, double a, double *g);

typedef struct elem_job {
  elem_fn f;
  size_t n, width;
  int parts;
  double a, g; /* the parameter; dloss / n */
  const float *x, *t, *col_a;
  float *dx;
  double *sums;   /* [parts] */
  size_t *counts; /* [parts]: values where x > 0 agrees with t > 0.5 */
} elem_job;

static double mse(double x, double t, double a, double *g) {
  (void)a;
  double d = x - t;
  *g = 2 * d;
  return d * d;
}

static double sign(double d) {
  return d > 0 ? 1 : d < 0 ? -1 : 0;
}

static double l1(double x, double t, double a, double *g) {
  (void)a;
  double d = x - t;
  *g = sign(d);
  return fabs(d);
}

static double smooth_l1(double x, double t, double beta, double *g) {
  double d = x - t;
  if (fabs(d) < beta) {
    *g = d / beta;
    return 0.5 * d * d / beta;
  }
  *g = sign(d);
  return fabs(d) - 0.5 * beta;
}

static double huber(double x, double t, double delta, double *g) {
  double d = x - t;
  if (fabs(d) < delta) {
    *g = d;
    return 0.5 * d * d;
  }
  *g = delta * sign(d);
  return delta * (fabs(d) - 0.5 * delta);
}

/* (1 - t) x + (1 + (p - 1) t) softplus(-x), softplus(-x) = log(1 + e^-|x|)
 * + max(-x, 0); its derivative (1 + (p - 1) t) sigmoid(x) - p t. */
static double bce(double x, double t, double p, double *g) {
  double w = 1 + (p - 1) * t;
  double sp = log1p(exp(-fabs(x))) + (x < 0 ? -x : 0);
  double sig = x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x));
  *g = w * sig - p * t;
  return (1 - t) * x + w * sp;
}

static void elem_task(void *ctx, int task, int thread) {
  (void)thread;
  const elem_job *j = ctx;
  size_t lo, hi, hits = 0;
  nn__range16(j->n, j->parts, task, &lo, &hi);
  double s = 0, g;
  for (size_t i = lo; i < hi; i++) {
    double a = j->col_a ? j->col_a[i % j->width] : j->a;
    s += j->f(j->x[i], j->t[i], a, &g);
    if (j->dx)
      j->dx[i] += (float)(j->g * g);
    hits += (j->x[i] > 0) == (j->t[i] > 0.5f);
  }
  j->sums[task] = s;
  j->counts[task] = hits;
}

static int elementwise(lk_nn *nn, const char *what, elem_job *j, double *loss,
                       float dloss, size_t *correct) {
  NN_CHECK(nn && loss && j->x && j->t, "loss",
           "%s needs the context, loss, input and target", what);
  NN_CHECK(j->n >= 1 && j->n <= (size_t)1 << 40, "loss",
           "%s of %zu values; expected >= 1", what, j->n);
  j->parts = nn__parts(j->n, GRAIN);
  size_t bytes = (size_t)j->parts * (sizeof(double) + sizeof(size_t));
  int rc = nn__reserve(nn, what, bytes, 0);
  if (rc < 0)
    return rc;
  j->g = (double)dloss / (double)j->n;
  j->sums = nn__shared(nn);
  j->counts = (size_t *)(void *)(j->sums + j->parts);
  nn__run(nn, j->parts, elem_task, j);
  double s = 0;
  size_t hits = 0;
  for (int p = 0; p < j->parts; p++) {
    s += j->sums[p];
    hits += j->counts[p];
  }
  *loss = s / (double)j->n;
  if (correct)
    *correct = hits;
  return 0;
}

int lk_nn_mse(lk_nn *nn, double *loss, float *dinput, const float *input,
              const float *target, size_t n, float dloss) {
  elem_job j = {
      .f = mse, .n = n, .width = 1, .x = input, .t = target, .dx = dinput};
  return elementwise(nn, "mse", &j, loss, dloss, NULL);
}

int lk_nn_l1(lk_nn *nn, double *loss, float *dinput, const float *input,
             const float *target, size_t n, float dloss) {
  elem_job j = {
      .f = l1, .n = n, .width = 1, .x = input, .t = target, .dx = dinput};
  return elementwise(nn, "l1", &j, loss, dloss, NULL);
}

int lk_nn_smooth_l1(lk_nn *nn, double *loss, float *dinput, const float *input,
                    const float *target, size_t n, float beta, float dloss) {
  NN_CHECK(beta >= 0, "smooth_l1", "beta = %g; expected >= 0", (double)beta);
  elem_job j = {.f = beta > 0 ? smooth_l1 : l1, /* torch's: 0 is l1 */
                .n = n,
                .width = 1,
                .a = beta,
                .x = input,
                .t = target,
                .dx = dinput};
  return elementwise(nn, "smooth_l1", &j, loss, dloss, NULL);
}

int lk_nn_huber(lk_nn *nn, double *loss, float *dinput, const float *input,
                const float *target, size_t n, float delta, float dloss) {
  NN_CHECK(delta > 0, "huber", "delta = %g; expected > 0", (double)delta);
  elem_job j = {.f = huber,
                .n = n,
                .width = 1,
                .a = delta,
                .x = input,
                .t = target,
                .dx = dinput};
  return elementwise(nn, "huber", &j, loss, dloss, NULL);
}

int lk_nn_bce_with_logits(lk_nn *nn, double *loss, float *dinput,
                          const float *input, const float *target, size_t n,
                          const float *pos_weight, size_t width, float dloss,
                          size_t *correct) {
  NN_CHECK(width >= 1 && n % width == 0, "bce_with_logits",
           "%zu values in rows of width %zu", n, width);
  elem_job j = {.f = bce,
                .n = n,
                .width = width,
                .a = 1,
                .x = input,
                .t = target,
                .col_a = pos_weight,
                .dx = dinput};
  return elementwise(nn, "bce_with_logits", &j, loss, dloss, correct);
}

/* ---- class losses -------------------------------------------------------- */

static int check_targets(const char *what, const int32_t *targets, int N, int C,
                         const float *weight) {
  for (int i = 0; i < N; i++)
    NN_CHECK(targets[i] >= 0 && targets[i] < C, "loss",
             "%s: target %d of row %d is out of range: there are %d classes "
             "(0 to %d)",
             what, (int)targets[i], i, C, C - 1);
  for (int c = 0; weight && c < C; c++)
    NN_CHECK(isfinite(weight[c]) && weight[c] >= 0, "loss",
             "%s: weight %g of class %d; expected finite and >= 0", what,
             (double)weight[c], c);
  return 0;
}

/* The first index of row Z's maximum. */
static int first_max(const float *z, int C) {
  int a = 0;
  for (int k = 1; k < C; k++)
    if (z[k] > z[a])
      a = k;
  return a;
}

/* sum_i w[y_i], in order; 0 is refused (torch's mean is then NaN). */
static int weight_sum(const char *what, const int32_t *targets, int N,
                      const float *weight, double *out) {
  double w = 0;
  for (int i = 0; i < N; i++)
    w += weight ? weight[targets[i]] : 1;
  NN_CHECK(w > 0, "loss",
           "%s: the targets' class weights sum to 0: the mean is undefined",
           what);
  *out = w;
  return 0;
}

int lk_nn_nll(lk_nn *nn, double *loss, float *dinput, const float *input,
              const int32_t *targets, int N, int C, const float *weight,
              float dloss, int *correct) {
  NN_CHECK(nn && loss && input && targets, "nll",
           "needs the context, loss, input and targets");
  NN_CHECK(N >= 1 && C >= 1, "nll", "sizes N = %d, C = %d; expected >= 1", N,
           C);
  double W = 1, s = 0;
  int rc = check_targets("nll", targets, N, C, weight), hits = 0;
  if (rc == 0)
    rc = weight_sum("nll", targets, N, weight, &W);
  if (rc != 0)
    return rc;
  for (int i = 0; i < N; i++) {
    const float *x = input + (size_t)i * (size_t)C;
    int y = targets[i];
    double w = weight ? weight[y] : 1;
    s -= w * x[y];
    if (dinput)
      dinput[(size_t)i * (size_t)C + (size_t)y] += (float)(-dloss * w / W);
    hits += first_max(x, C) == y;
  }
  *loss = s / W;
  if (correct)
    *correct = hits;
  return 0;
}

typedef struct xent_job {
  int N, V, parts;
  double eps, g, sw; /* label smoothing; dloss / sum w[y]; sum of w */
  const float *logits, *weight;
  const int32_t *targets;
  float *dlogits;
  double *losses;
  uint8_t *hits;
} xent_job;

/* Row I: its loss (before the division by sum w[y]) and gradient. */
static void xent_row(const xent_job *j, size_t i) {
  const float *z = j->logits + i * (size_t)j->V;
  int V = j->V, y = j->targets[i], a = first_max(z, V);
  double sum = 0;
  for (int k = 0; k < V; k++)
    sum += exp((double)z[k] - z[a]);
  double lse = z[a] + log(sum), smooth = 0;
  for (int k = 0; k < V; k++)
    smooth += (j->weight ? j->weight[k] : 1) * (lse - z[k]);
  double wy = j->weight ? j->weight[y] : 1;
  j->losses[i] = (1 - j->eps) * wy * (lse - z[y]) + j->eps / V * smooth;
  j->hits[i] = a == y;
  if (!j->dlogits)
    return;
  float *d = j->dlogits + i * (size_t)V;
  for (int k = 0; k < V; k++) {
    double p = exp((double)z[k] - lse), wk = j->weight ? j->weight[k] : 1;
    double v =
        (1 - j->eps) * wy * (p - (k == y)) + j->eps / V * (p * j->sw - wk);
    d[k] += (float)(j->g * v);
  }
}

static void xent_task(void *ctx, int task, int thread) {
  (void)thread;
  const xent_job *j = ctx;
  size_t lo, hi;
  nn__range((size_t)j->N, j->parts, task, &lo, &hi);
  for (size_t i = lo; i < hi; i++)
    xent_row(j, i);
}

int lk_nn_crossentropy_ex(lk_nn *nn, double *loss, float *dlogits,
                          const float *logits, const int32_t *targets, int N,
                          int V, const float *weight, float label_smoothing,
                          float dloss, int *correct) {
  NN_CHECK(nn && loss && logits && targets, "crossentropy",
           "needs the context, loss, logits and targets");
  NN_CHECK(N >= 1 && V >= 1, "crossentropy",
           "sizes N = %d, V = %d; expected >= 1", N, V);
  NN_CHECK(label_smoothing >= 0 && label_smoothing <= 1, "crossentropy",
           "label_smoothing = %g; expected in [0, 1]", (double)label_smoothing);
  double W = 1;
  int rc = check_targets("crossentropy", targets, N, V, weight);
  if (rc == 0)
    rc = weight_sum("crossentropy", targets, N, weight, &W);
  if (rc == 0)
    rc = nn__reserve(nn, "crossentropy", (size_t)N * (sizeof(double) + 1), 0);
  if (rc < 0)
    return rc;
  xent_job j = {.N = N,
                .V = V,
                .parts =
                    nn__parts((size_t)N, (GRAIN + (size_t)V - 1) / (size_t)V),
                .eps = label_smoothing,
                .g = dloss / W,
                .sw = V,
                .logits = logits,
                .weight = weight,
                .targets = targets,
                .dlogits = dlogits,
                .losses = nn__shared(nn)};
  j.hits = (uint8_t *)(j.losses + N);
  if (weight) {
    j.sw = 0;
    for (int c = 0; c < V; c++)
      j.sw += weight[c];
  }
  nn__run(nn, j.parts, xent_task, &j);
  double s = 0;
  int hits = 0;
  for (int i = 0; i < N; i++) {
    s += j.losses[i];
    hits += j.hits[i];
  }
  *loss = s / W;
  if (correct)
    *correct = hits;
  return 0;
}

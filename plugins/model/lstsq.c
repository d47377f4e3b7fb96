/* lstsq: a small least-squares problem with two parameter tensors, the
 * weights x[n] and the bias b[1]: loss = mean_i (A x + b - y)_i^2 with
 * A[i][j] = sin(1 + i*n + j) and y[i] = cos(1 + i). Deterministic, so that
 * tests can compare optimizers with torch.optim on the same problem. */
#include <math.h>
#include <stdlib.h>

#include <loopkit/loopkit.h>

#include "bundled.h"

typedef struct lstsq {
  size_t m, n;
  lk_tensor *x, *b;
  double *a, *y, *r; /* A, y, and the residual of the last step */
} lstsq;

static void destroy(void *self) {
  lstsq *p = self;
  free(p->a);
  free(p->y);
  free(p->r);
  free(p);
}

static int create(lk_host *host, const lk_options *o, void **self) {
  int64_t m = lk_opt_int(o, "m"), n = lk_opt_int(o, "n");
  lstsq *p = calloc(1, sizeof *p);
  if (!p)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  p->m = (size_t)m;
  p->n = (size_t)n;
  size_t bytes = 0;
  if (!lk_size_mul(p->m, p->n, &bytes) ||
      !lk_size_mul(bytes, sizeof *p->a, &bytes)) {
    destroy(p);
    return lk_fail(host, LK_ECONFIG,
                   "m = %zu and n = %zu: A [m, n] holds more bytes than a "
                   "size_t counts",
                   (size_t)m, (size_t)n);
  }
  p->a = malloc(bytes);
  p->y = malloc(p->m * sizeof *p->y);
  p->r = malloc(p->m * sizeof *p->r);
  if (!p->a || !p->y || !p->r) {
    destroy(p);
    return lk_fail(host, LK_ENOMEM, "out of memory");
  }
  lk_dtype dtype = lk_opt_string(o, "dtype")[1] == '3' ? LK_F32 : LK_F64;
  for (size_t i = 0; i < p->m; i++) {
    for (size_t j = 0; j < p->n; j++) {
      double v = sin(1.0 + (double)(i * p->n + j));
      p->a[i * p->n + j] = dtype == LK_F32 ? (double)(float)v : v;
    }
    double v = cos(1.0 + (double)i);
    p->y[i] = dtype == LK_F32 ? (double)(float)v : v;
  }
  size_t one = 1;
  int rc = lk_host_add_param(host, "x", dtype, 1, &p->n, &p->x);
  if (rc == 0)
    rc = lk_host_add_param(host, "b", dtype, 1, &one, &p->b);
  if (rc != 0) {
    destroy(p);
    return rc;
  }
  *self = p;
  return 0;
}

static double get(const lk_tensor *t, size_t i) {
  return t->dtype == LK_F64 ? ((const double *)t->data)[i]
                            : (double)((const float *)t->data)[i];
}

static void add_grad(lk_tensor *t, size_t i, double g) {
  if (t->dtype == LK_F64)
    ((double *)t->grad)[i] += g;
  else
    ((float *)t->grad)[i] += (float)g;
}

static int training_step(void *self, const lk_batch *batch,
                         lk_step_result *out) {
  lstsq *p = self;
  (void)batch;
  double loss = 0;
  for (size_t i = 0; i < p->m; i++) {
    double s = 0;
    for (size_t j = 0; j < p->n; j++)
      s += p->a[i * p->n + j] * get(p->x, j);
    p->r[i] = (s + get(p->b, 0)) - p->y[i]; /* torch: A @ x + b - y */
    loss += p->r[i] * p->r[i];
  }
  out->has_loss = true;
  out->loss = loss / (double)p->m;
  return 0;
}

static int backward(void *self, const lk_batch *batch, double scale) {
  lstsq *p = self;
  (void)batch;
  double k = scale * 2.0 / (double)p->m, gb = 0;
  for (size_t j = 0; j < p->n; j++) {
    double g = 0;
    for (size_t i = 0; i < p->m; i++)
      g += p->a[i * p->n + j] * p->r[i];
    add_grad(p->x, j, k * g);
  }
  for (size_t i = 0; i < p->m; i++)
    gb += p->r[i];
  add_grad(p->b, 0, k * gb);
  return 0;
}

static const lk_option options[] = {
    {"m", LK_OPT_INT, "20", "rows of A (samples)", "[1, inf)"},
    {"n", LK_OPT_INT, "5", "columns of A (weights)", "[1, inf)"},
    {"dtype", LK_OPT_ENUM, "f64", "parameter type", "f64|f32"},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_step_ops step_ops = {.training_step = training_step};
static const lk_backward_ops backward_ops = {.backward = backward};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_PLUGIN(
    "lstsq", "least squares: mean((A x + b - y)^2), A and y fixed", destroy,
    NULL, .step = &step_ops, .backward = &backward_ops);

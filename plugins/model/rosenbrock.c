/* rosenbrock: the Rosenbrock function as a model with no data,
 *   f(x) = sum_{i=0}^{n-2} 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2,
 * one instance serving as both step and backward.
 *
 * The arithmetic follows what torch autograd does for the expression
 * (100 * (x[1:] - x[:-1]**2)**2 + (1 - x[:-1])**2).sum(), operation by
 * operation, so that optimizers can be compared with torch's iterates to the
 * last bits: d**2 is d*d, the backward of u**2 is g*(2u), and x[i] gets its two
 * contributions (as x[:-1] and as x[1:]) added once. */
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

#include "bundled.h"

typedef struct rosenbrock {
  lk_tensor *x;
} rosenbrock;

static int create(lk_host *host, const lk_options *o, void **self) {
  int64_t n = lk_opt_int(o, "n");
  size_t n_x0 = 0;
  const double *x0 = lk_opt_doubles(o, "x0", &n_x0);
  const char *dtype = lk_opt_string(o, "dtype");
  if (!x0 || n_x0 == 0)
    return lk_fail(host, LK_ECONFIG,
                   "option x0 is empty: give at least one "
                   "value (it is cycled to length n)");
  rosenbrock *m = calloc(1, sizeof *m);
  if (!m)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  size_t shape = (size_t)n;
  lk_dtype dt = dtype && strcmp(dtype, "f32") == 0 ? LK_F32 : LK_F64;
  int rc = lk_host_add_param(host, "x", dt, 1, &shape, &m->x);
  if (rc != 0) {
    free(m);
    return rc;
  }
  for (size_t i = 0; i < shape; i++) {
    if (dt == LK_F64)
      ((double *)m->x->data)[i] = x0[i % n_x0];
    else
      ((float *)m->x->data)[i] = (float)x0[i % n_x0];
  }
  *self = m;
  return 0;
}

static void destroy(void *self) {
  free(self);
}

/* The loss and grad += scale * df/dx in precision T, each computed in its
 * own (the sum is sequential). For term i, autograd gives x[i+1] the
 * gradient gd = 100*(2d) and x[i] the gradient (-gd)*(2x[i]) + -(2e); x[i]
 * then adds the part it got as x[i+1] of the previous term (CARRY). */
#define ROSENBROCK(T)                                                          \
  static T loss_##T(const T *x, size_t n) {                                    \
    T f = 0;                                                                   \
    for (size_t i = 0; i + 1 < n; i++) {                                       \
      T d = x[i + 1] - x[i] * x[i], e = 1 - x[i];                              \
      f += (T)100 * (d * d) + e * e;                                           \
    }                                                                          \
    return f;                                                                  \
  }                                                                            \
  static void grad_##T(const T *x, T *g, size_t n, double scale) {             \
    T carry = 0, s = (T)scale;                                                 \
    for (size_t i = 0; i < n; i++) {                                           \
      if (i + 1 < n) {                                                         \
        T d = x[i + 1] - x[i] * x[i], e = 1 - x[i];                            \
        T gd = (T)100 * (2 * d);                                               \
        T own = -gd * (2 * x[i]) + -(2 * e);                                   \
        g[i] += s * (own + carry);                                             \
        carry = gd;                                                            \
      } else {                                                                 \
        g[i] += s * carry;                                                     \
      }                                                                        \
    }                                                                          \
  }
ROSENBROCK(double)
ROSENBROCK(float)

static int training_step(void *self, const lk_batch *batch,
                         lk_step_result *out) {
  const lk_tensor *x = ((rosenbrock *)self)->x;
  (void)batch; /* the problem has no data */
  out->has_loss = true;
  out->loss = x->dtype == LK_F64 ? loss_double(x->data, x->numel)
                                 : (double)loss_float(x->data, x->numel);
  return 0;
}

static int backward(void *self, const lk_batch *batch, double scale) {
  lk_tensor *x = ((rosenbrock *)self)->x;
  (void)batch;
  if (x->dtype == LK_F64)
    grad_double(x->data, x->grad, x->numel, scale);
  else
    grad_float(x->data, x->grad, x->numel, scale);
  return 0;
}

static const lk_option options[] = {
    {"n", LK_OPT_INT, "2", "dimension", "[2, inf)"},
    {"x0", LK_OPT_DOUBLES, "-1.2,1", "starting point, cycled to length n",
     NULL},
    {"dtype", LK_OPT_ENUM, "f64", "precision of x and of the arithmetic",
     "f64|f32"},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_step_ops step_ops = {.training_step = training_step};
static const lk_backward_ops backward_ops = {.backward = backward};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_PLUGIN(
    "rosenbrock",
    "the Rosenbrock function in n dimensions (step and backward, "
    "no data)",
    destroy, NULL, .step = &step_ops, .backward = &backward_ops);

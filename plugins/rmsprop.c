/* rmsprop: RMSprop as torch.optim.RMSprop 1.13 (_single_tensor_rmsprop),
 * with its option names, defaults and checks.
 *
 * The iterates match torch's to the last bit. Torch's CPU kernels fuse
 * square_avg.mul_(a).addcmul_(g, g, value=1-a) into fma((1-a)*g, g, v*a),
 * grad_avg.mul_(a).add_(g, alpha=1-a) into fma(1-a, g, ga*a),
 * square_avg.addcmul(ga, ga, value=-1) into fma(-ga, ga, v),
 * grad.add(p, alpha=wd) into fma(wd, p, g) and param.add_(buf, alpha=-lr)
 * into fma(-lr, buf, p); addcdiv_ rounds each operation (p + (-lr*g)/avg,
 * buf*m + g/avg). So this file must be compiled with -ffp-contract=off. f32
 * parameters are updated in float with each scalar rounded to float. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <loopkit/loopkit.h>

typedef struct rmsprop {
  lk_host *host;
  lk_tensor *lr;   /* [1] f64, host state: a scheduler changes it */
  lk_tensor *step; /* [1] f64, host state: steps taken, as torch counts */
  double alpha, eps, weight_decay, momentum;
  bool centered, maximize;
  size_t n; /* parameters at create time */
  /* Host state, one tensor per parameter each, zero-filled as torch's:
   * momentum_buffer only with momentum > 0, grad_avg only when centered. */
  lk_tensor **square_avg, **momentum_buffer, **grad_avg;
} rmsprop;

static int check_finite(lk_host *host, const char *name, double v) {
  if (!isfinite(v))
    return lk_fail(host, LK_ECONFIG, "option %s = %g: must be finite", name, v);
  return 0;
}

static int check_nonnegative(lk_host *host, const char *name, double v,
                             const char *what) {
  if (v < 0)
    return lk_fail(host, LK_ECONFIG,
                   "option %s = %g: invalid %s (must be >= 0)", name, v, what);
  return 0;
}

/* Adds the state tensor "WHAT.PARAM" shaped like each parameter. */
static int add_buffers(lk_host *host, lk_tensor *const *params, size_t n,
                       const char *what, lk_tensor **out) {
  for (size_t i = 0; i < n; i++) {
    const lk_tensor *p = params[i];
    char name[256];
    if (snprintf(name, sizeof name, "%s.%s", what, p->name) >= (int)sizeof name)
      return lk_fail(host, LK_EINVAL,
                     "parameter name \"%s\" is too long for its %s buffer's "
                     "name",
                     p->name, what);
    int rc =
        lk_host_add_state(host, name, p->dtype, p->ndim, p->shape, &out[i]);
    if (rc != 0)
      return rc;
  }
  return 0;
}

static void destroy(void *self) {
  rmsprop *s = self;
  free(s->square_avg);
  free(s);
}

static int create(lk_host *host, const lk_options *o, void **self) {
  double lr = lk_opt_double(o, "lr"), alpha = lk_opt_double(o, "alpha");
  double eps = lk_opt_double(o, "eps");
  double weight_decay = lk_opt_double(o, "weight_decay");
  double momentum = lk_opt_double(o, "momentum");
  int rc;

  /* torch's checks, in torch's order, after refusing inf and nan (which
   * torch lets through to poison the weights). */
  if ((rc = check_finite(host, "lr", lr)) != 0 ||
      (rc = check_finite(host, "alpha", alpha)) != 0 ||
      (rc = check_finite(host, "eps", eps)) != 0 ||
      (rc = check_finite(host, "weight_decay", weight_decay)) != 0 ||
      (rc = check_finite(host, "momentum", momentum)) != 0 ||
      (rc = check_nonnegative(host, "lr", lr, "learning rate")) != 0 ||
      (rc = check_nonnegative(host, "eps", eps, "epsilon value")) != 0 ||
      (rc = check_nonnegative(host, "momentum", momentum, "momentum value")) !=
          0 ||
      (rc = check_nonnegative(host, "weight_decay", weight_decay,
                              "weight_decay value")) != 0 ||
      (rc = check_nonnegative(host, "alpha", alpha, "alpha value")) != 0)
    return rc;

  size_t n = 0;
  lk_tensor *const *params = lk_host_params(host, &n);
  if (n == 0)
    return lk_fail(host, LK_ECONFIG,
                   "no parameters to optimize (the model registered none)");

  rmsprop *s = calloc(1, sizeof *s);
  if (!s)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  s->host = host;
  s->alpha = alpha;
  s->eps = eps;
  s->weight_decay = weight_decay;
  s->momentum = momentum;
  s->centered = lk_opt_bool(o, "centered");
  s->maximize = lk_opt_bool(o, "maximize");
  s->n = n;
  /* One allocation for the three lists. */
  if (!(s->square_avg = calloc(3 * n, sizeof *s->square_avg))) {
    free(s);
    return lk_fail(host, LK_ENOMEM, "out of memory");
  }
  s->momentum_buffer = s->square_avg + n;
  s->grad_avg = s->square_avg + 2 * n;

  size_t one = 1;
  rc = lk_host_add_state(host, "lr", LK_F64, 1, &one, &s->lr);
  if (rc == 0)
    rc = lk_host_add_state(host, "step", LK_F64, 1, &one, &s->step);
  if (rc == 0)
    rc = add_buffers(host, params, n, "square_avg", s->square_avg);
  if (rc == 0 && momentum > 0)
    rc = add_buffers(host, params, n, "momentum_buffer", s->momentum_buffer);
  if (rc == 0 && s->centered)
    rc = add_buffers(host, params, n, "grad_avg", s->grad_avg);
  if (rc != 0) {
    destroy(s);
    return rc;
  }
  *(double *)s->lr->data = lr;
  *self = s;
  return 0;
}

/* A checkpoint's values: the rate, the step count, and square averages
 * that are never negative. */
static int check_state(void *self) {
  rmsprop *s = self;
  int rc = lk_state_check(s->host, s->lr, 0, DBL_MAX, false);
  if (rc == 0)
    rc = lk_state_check(s->host, s->step, 0, LK_STATE_MAX_COUNT, true);
  for (size_t i = 0; rc == 0 && i < s->n; i++)
    rc = lk_state_check(s->host, s->square_avg[i], 0, DBL_MAX, false);
  return rc;
}

static double get_lr(void *self) {
  return *(const double *)((rmsprop *)self)->lr->data;
}

static void set_lr(void *self, double lr) {
  *(double *)((rmsprop *)self)->lr->data = lr;
}

/* One parameter in double; buf is NULL without momentum, ga when not
 * centered. */
static void update_f64(const rmsprop *s, double *p, const double *grad,
                       double *sq, double *buf, double *ga, size_t numel) {
  double lr = get_lr((void *)s), a = s->alpha, keep = 1 - s->alpha;
  double wd = s->weight_decay, eps = s->eps, m = s->momentum;
  for (size_t k = 0; k < numel; k++) {
    double g = s->maximize ? -grad[k] : grad[k];
    if (wd != 0)
      g = fma(wd, p[k], g);
    sq[k] = fma(keep * g, g, sq[k] * a);
    double avg;
    if (ga) {
      ga[k] = fma(keep, g, ga[k] * a);
      avg = sqrt(fma(-ga[k], ga[k], sq[k]));
    } else {
      avg = sqrt(sq[k]);
    }
    avg = avg + eps;
    if (buf) {
      buf[k] = buf[k] * m + g / avg;
      p[k] = fma(-lr, buf[k], p[k]);
    } else {
      p[k] = p[k] + (-lr * g) / avg;
    }
  }
}

/* The same in float: torch rounds the Python scalars to the tensor's type. */
static void update_f32(const rmsprop *s, float *p, const float *grad, float *sq,
                       float *buf, float *ga, size_t numel) {
  float neg_lr = (float)-get_lr((void *)s), a = (float)s->alpha;
  float keep = (float)(1 - s->alpha), wd = (float)s->weight_decay;
  float eps = (float)s->eps, m = (float)s->momentum;
  for (size_t k = 0; k < numel; k++) {
    float g = s->maximize ? -grad[k] : grad[k];
    if (s->weight_decay != 0)
      g = fmaf(wd, p[k], g);
    sq[k] = fmaf(keep * g, g, sq[k] * a);
    float avg;
    if (ga) {
      ga[k] = fmaf(keep, g, ga[k] * a);
      avg = sqrtf(fmaf(-ga[k], ga[k], sq[k]));
    } else {
      avg = sqrtf(sq[k]);
    }
    avg = avg + eps;
    if (buf) {
      buf[k] = buf[k] * m + g / avg;
      p[k] = fmaf(neg_lr, buf[k], p[k]);
    } else {
      p[k] = p[k] + (neg_lr * g) / avg;
    }
  }
}

static int step(void *self, lk_tensor *const *params, size_t n,
                lk_closure_fn closure) {
  rmsprop *s = self;
  if (closure && !isfinite(closure()))
    return 0; /* the evaluation failed or gave no loss: leave params be */
  if (n != s->n)
    return lk_fail(s->host, LK_ESTATE,
                   "called with %zu parameters, created with %zu", n, s->n);
  for (size_t i = 0; i < n; i++)
    if (s->square_avg[i]->numel != params[i]->numel ||
        s->square_avg[i]->dtype != params[i]->dtype)
      return lk_fail(s->host, LK_ESTATE,
                     "parameter %s does not match its buffer %s",
                     params[i]->name, s->square_avg[i]->name);
  ((double *)s->step->data)[0] += 1;
  for (size_t i = 0; i < n; i++) {
    lk_tensor *p = params[i];
    void *buf = s->momentum > 0 ? s->momentum_buffer[i]->data : NULL;
    void *ga = s->centered ? s->grad_avg[i]->data : NULL;
    if (p->dtype == LK_F64)
      update_f64(s, p->data, p->grad, s->square_avg[i]->data, buf, ga,
                 p->numel);
    else
      update_f32(s, p->data, p->grad, s->square_avg[i]->data, buf, ga,
                 p->numel);
  }
  return 0;
}

static const lk_option options[] = {
    {"lr", LK_OPT_DOUBLE, "0.01", "learning rate, >= 0", NULL},
    {"alpha", LK_OPT_DOUBLE, "0.99",
     "smoothing constant of the running average of the squared gradient, "
     ">= 0",
     NULL},
    {"eps", LK_OPT_DOUBLE, "1e-8",
     "added to the denominator for numerical stability, >= 0", NULL},
    {"weight_decay", LK_OPT_DOUBLE, "0",
     "L2 penalty added to the gradient, >= 0", NULL},
    {"momentum", LK_OPT_DOUBLE, "0", "momentum factor, >= 0", NULL},
    {"centered", LK_OPT_BOOL, "false",
     "normalize by an estimate of the gradient's variance (subtracting the "
     "squared running average of the gradient)",
     NULL},
    {"maximize", LK_OPT_BOOL, "false",
     "maximize the objective instead of minimizing it", NULL},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_optimizer_ops optimizer_ops = {
    .step = step, .get_lr = get_lr, .set_lr = set_lr};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "rmsprop",
    .version = "1.0",
    .summary = "RMSprop, as torch.optim.RMSprop",
    .options = options,
    .create = create,
    .destroy = destroy,
    .optimizer = &optimizer_ops,
    .check_state = check_state,
};

/* adagrad: Adagrad as torch.optim.Adagrad 1.13 (_single_tensor_adagrad,
 * dense gradients), with its option names, defaults and checks.
 *
 * The iterates match torch's to the last bit. Torch's CPU kernels fuse
 * state_sum.addcmul_(g, g, value=1) into fma(g, g, sum) and
 * grad.add(p, alpha=wd) into fma(wd, p, g); param.addcdiv_(g, std,
 * value=-clr) rounds each operation (p + (-clr*g)/std), and clr is Python
 * float arithmetic, lr / (1 + (step - 1) * lr_decay). So this file must be
 * compiled with -ffp-contract=off. f32 parameters are updated in float with
 * each scalar rounded to float. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <loopkit/loopkit.h>

typedef struct adagrad {
  lk_host *host;
  lk_tensor *lr;   /* [1] f64, host state: a scheduler changes it */
  lk_tensor *step; /* [1] f64, host state: steps taken (torch's state_steps) */
  double lr_decay, weight_decay, eps;
  bool maximize;
  size_t n;        /* parameters at create time */
  lk_tensor **sum; /* host state, one per parameter: the sums of g^2 */
} adagrad;

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

static void destroy(void *self) {
  adagrad *s = self;
  free(s->sum);
  free(s);
}

static int create(lk_host *host, const lk_options *o, void **self) {
  double lr = lk_opt_double(o, "lr"), lr_decay = lk_opt_double(o, "lr_decay");
  double weight_decay = lk_opt_double(o, "weight_decay");
  double init = lk_opt_double(o, "initial_accumulator_value");
  double eps = lk_opt_double(o, "eps");
  int rc;

  /* torch's checks, in torch's order, after refusing inf and nan (which
   * torch lets through to poison the weights). */
  if ((rc = check_finite(host, "lr", lr)) != 0 ||
      (rc = check_finite(host, "lr_decay", lr_decay)) != 0 ||
      (rc = check_finite(host, "weight_decay", weight_decay)) != 0 ||
      (rc = check_finite(host, "initial_accumulator_value", init)) != 0 ||
      (rc = check_finite(host, "eps", eps)) != 0 ||
      (rc = check_nonnegative(host, "lr", lr, "learning rate")) != 0 ||
      (rc = check_nonnegative(host, "lr_decay", lr_decay, "lr_decay value")) !=
          0 ||
      (rc = check_nonnegative(host, "weight_decay", weight_decay,
                              "weight_decay value")) != 0 ||
      (rc = check_nonnegative(host, "initial_accumulator_value", init,
                              "initial_accumulator_value value")) != 0 ||
      (rc = check_nonnegative(host, "eps", eps, "epsilon value")) != 0)
    return rc;

  size_t n = 0;
  lk_tensor *const *params = lk_host_params(host, &n);
  if (n == 0)
    return lk_fail(host, LK_ECONFIG,
                   "no parameters to optimize (the model registered none)");

  adagrad *s = calloc(1, sizeof *s);
  if (!s)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  s->host = host;
  s->lr_decay = lr_decay;
  s->weight_decay = weight_decay;
  s->eps = eps;
  s->maximize = lk_opt_bool(o, "maximize");
  s->n = n;
  if (!(s->sum = calloc(n, sizeof *s->sum))) {
    free(s);
    return lk_fail(host, LK_ENOMEM, "out of memory");
  }

  size_t one = 1;
  rc = lk_host_add_state(host, "lr", LK_F64, 1, &one, &s->lr);
  if (rc == 0)
    rc = lk_host_add_state(host, "step", LK_F64, 1, &one, &s->step);
  for (size_t i = 0; rc == 0 && i < n; i++) {
    const lk_tensor *p = params[i];
    char name[256];
    if (snprintf(name, sizeof name, "sum.%s", p->name) >= (int)sizeof name) {
      rc = lk_fail(host, LK_EINVAL,
                   "parameter name \"%s\" is too long for its sum buffer's "
                   "name",
                   p->name);
      break;
    }
    rc = lk_host_add_state(host, name, p->dtype, p->ndim, p->shape, &s->sum[i]);
    /* torch fills the sums in its constructor; a resume overwrites them. */
    for (size_t k = 0; rc == 0 && k < p->numel; k++) {
      if (p->dtype == LK_F64)
        ((double *)s->sum[i]->data)[k] = init;
      else
        ((float *)s->sum[i]->data)[k] = (float)init;
    }
  }
  if (rc != 0) {
    destroy(s);
    return rc;
  }
  *(double *)s->lr->data = lr;
  *self = s;
  return 0;
}

/* A checkpoint's values: the rate, the step count, and sums of squares
 * (from an initial value >= 0) that are never negative. */
static int check_state(void *self) {
  adagrad *s = self;
  int rc = lk_state_check(s->host, s->lr, 0, DBL_MAX, false);
  if (rc == 0)
    rc = lk_state_check(s->host, s->step, 0, LK_STATE_MAX_COUNT, true);
  for (size_t i = 0; rc == 0 && i < s->n; i++)
    rc = lk_state_check(s->host, s->sum[i], 0, DBL_MAX, false);
  return rc;
}

static double get_lr(void *self) {
  return *(const double *)((adagrad *)self)->lr->data;
}

static void set_lr(void *self, double lr) {
  *(double *)((adagrad *)self)->lr->data = lr;
}

static void update_f64(const adagrad *s, double clr, double *p,
                       const double *grad, double *sum, size_t numel) {
  double wd = s->weight_decay, eps = s->eps;
  for (size_t k = 0; k < numel; k++) {
    double g = s->maximize ? -grad[k] : grad[k];
    if (wd != 0)
      g = fma(wd, p[k], g);
    sum[k] = fma(g, g, sum[k]);
    double std = sqrt(sum[k]) + eps;
    p[k] = p[k] + (-clr * g) / std;
  }
}

/* The same in float: torch rounds the Python scalars to the tensor's type. */
static void update_f32(const adagrad *s, double clr, float *p,
                       const float *grad, float *sum, size_t numel) {
  float wd = (float)s->weight_decay, eps = (float)s->eps;
  float neg_clr = (float)-clr;
  for (size_t k = 0; k < numel; k++) {
    float g = s->maximize ? -grad[k] : grad[k];
    if (s->weight_decay != 0)
      g = fmaf(wd, p[k], g);
    sum[k] = fmaf(g, g, sum[k]);
    float std = sqrtf(sum[k]) + eps;
    p[k] = p[k] + (neg_clr * g) / std;
  }
}

static int step(void *self, lk_tensor *const *params, size_t n,
                lk_closure_fn closure) {
  adagrad *s = self;
  if (closure && !isfinite(closure()))
    return 0; /* the evaluation failed or gave no loss: leave params be */
  if (n != s->n)
    return lk_fail(s->host, LK_ESTATE,
                   "called with %zu parameters, created with %zu", n, s->n);
  for (size_t i = 0; i < n; i++)
    if (s->sum[i]->numel != params[i]->numel ||
        s->sum[i]->dtype != params[i]->dtype)
      return lk_fail(s->host, LK_ESTATE,
                     "parameter %s does not match its buffer %s",
                     params[i]->name, s->sum[i]->name);
  /* torch counts steps per parameter; they all step together here. */
  double step = ((double *)s->step->data)[0] += 1;
  double clr = get_lr(s) / (1 + (step - 1) * s->lr_decay);
  for (size_t i = 0; i < n; i++) {
    lk_tensor *p = params[i];
    if (p->dtype == LK_F64)
      update_f64(s, clr, p->data, p->grad, s->sum[i]->data, p->numel);
    else
      update_f32(s, clr, p->data, p->grad, s->sum[i]->data, p->numel);
  }
  return 0;
}

static const lk_option options[] = {
    {"lr", LK_OPT_DOUBLE, "0.01", "learning rate, >= 0", NULL},
    {"lr_decay", LK_OPT_DOUBLE, "0",
     "learning rate decay: step t uses lr / (1 + (t - 1) * lr_decay), >= 0",
     NULL},
    {"weight_decay", LK_OPT_DOUBLE, "0",
     "L2 penalty added to the gradient, >= 0", NULL},
    {"initial_accumulator_value", LK_OPT_DOUBLE, "0",
     "starting value of the sums of squared gradients, >= 0", NULL},
    {"eps", LK_OPT_DOUBLE, "1e-10",
     "added to the denominator for numerical stability, >= 0", NULL},
    {"maximize", LK_OPT_BOOL, "false",
     "maximize the objective instead of minimizing it", NULL},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_optimizer_ops optimizer_ops = {
    .step = step, .get_lr = get_lr, .set_lr = set_lr};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "adagrad",
    .version = "1.0",
    .summary = "Adagrad, as torch.optim.Adagrad",
    .options = options,
    .create = create,
    .destroy = destroy,
    .optimizer = &optimizer_ops,
    .check_state = check_state,
};

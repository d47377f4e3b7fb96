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
#include <math.h>
#include <stdlib.h>

#include <loopkit/loopkit.h>

#include "bundled.h"
#include "optim_common.h"

typedef struct adagrad {
  optim_common c; /* lr, step (torch's state_steps); bufs: the sums */
  double lr_decay, weight_decay, eps;
  bool maximize;
  double clr; /* this step's rate: its scalars */
} adagrad;

/* A checkpoint's values: the rate, the step count, and sums of squares
 * (from an initial value >= 0) that are never negative. */
static int check_state(void *self) {
  adagrad *s = self;
  int rc = optim_check_state(&s->c);
  return rc ? rc : optim_check_squares(&s->c, s->c.bufs);
}

/* One parameter in double: BUFS the sum, with the step's rate. */
static void update_f64(const void *self, const void *scalars, void *pv,
                       const void *gv, void *const *bufs, size_t numel) {
  const adagrad *s = self;
  double *p = pv, *sum = bufs[0], clr = *(const double *)scalars;
  const double *grad = gv;
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
static void update_f32(const void *self, const void *scalars, void *pv,
                       const void *gv, void *const *bufs, size_t numel) {
  const adagrad *s = self;
  float *p = pv, *sum = bufs[0];
  const float *grad = gv;
  double clr = *(const double *)scalars;
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

/* The step's own part: the count, and the step's rate clr (the
 * scalars). */
static int prepare(void *self, const void **scalars) {
  adagrad *s = self;
  /* torch counts steps per parameter; they all step together here. */
  double step = ((double *)s->c.step->data)[0] += 1;
  s->clr = optim_get_lr(s) / (1 + (step - 1) * s->lr_decay);
  *scalars = &s->clr;
  return 0;
}

/* The host has checked the ranges, in torch's order (the table's), and
 * refused inf and nan (which torch lets through to poison the weights). */
static int create(lk_host *host, const lk_options *o, void **self) {
  static const optim_spec spec = {
      .size = sizeof(adagrad),
      .step = true,
      .lists = 1,
      .states = {"sum"},
      .fields = {OPTIM_FIELD(adagrad, lr_decay, DOUBLE),
                 OPTIM_FIELD(adagrad, weight_decay, DOUBLE),
                 OPTIM_FIELD(adagrad, eps, DOUBLE),
                 OPTIM_FIELD(adagrad, maximize, BOOL)},
      .kernel = {prepare, update_f64, update_f32}};
  int rc = optim_create(host, o, &spec, 0, self);
  if (rc != 0)
    return rc;
  adagrad *s = *self;
  /* torch fills the sums in its constructor; a resume overwrites them. */
  double init = lk_opt_double(o, "initial_accumulator_value");
  for (size_t i = 0; i < s->c.n; i++) {
    lk_tensor *t = s->c.bufs[i];
    for (size_t k = 0; k < t->numel; k++) {
      if (t->dtype == LK_F64)
        ((double *)t->data)[k] = init;
      else
        ((float *)t->data)[k] = (float)init;
    }
  }
  return 0;
}

/* In the order torch checks them: the host refuses the first bad one. */
static const lk_option options[] = {
    {"lr", LK_OPT_DOUBLE, "0.01", "learning rate", "[0, inf)"},
    {"lr_decay", LK_OPT_DOUBLE, "0",
     "learning rate decay: step t uses lr / (1 + (t - 1) * lr_decay)",
     "[0, inf)"},
    {"weight_decay", LK_OPT_DOUBLE, "0", "L2 penalty added to the gradient",
     "[0, inf)"},
    {"initial_accumulator_value", LK_OPT_DOUBLE, "0",
     "starting value of the sums of squared gradients", "[0, inf)"},
    {"eps", LK_OPT_DOUBLE, "1e-10",
     "added to the denominator for numerical stability", "[0, inf)"},
    OPTIM_MAXIMIZE_OPTION,
    {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_OPTIMIZER(
    "adagrad", "Adagrad, as torch.optim.Adagrad", optim_destroy, check_state,
    .step = optim_step, OPTIM_LR_ENTRIES);

/* adadelta: Adadelta as torch.optim.Adadelta 1.13 (_single_tensor_adadelta),
 * with its option names, defaults and checks.
 *
 * The iterates match torch's to the last bit. Torch's CPU kernels fuse
 * square_avg.mul_(rho).addcmul_(g, g, value=1-rho) into
 * fma((1-rho)*g, g, v*rho) (acc_delta's update alike), grad.add(p,
 * alpha=wd) into fma(wd, p, g) and param.add_(delta, alpha=-lr) into
 * fma(-lr, delta, p); the rest rounds at each operation
 * (sqrt(acc + eps) / sqrt(v + eps) * g). So this file must be compiled with
 * -ffp-contract=off. f32 parameters are updated in float with each scalar
 * rounded to float, as torch does. Adadelta has no momentum for a
 * scheduler to cycle. */
#include <math.h>
#include <stdlib.h>

#include <loopkit/loopkit.h>

#include "bundled.h"
#include "fma_clones.h"
#include "optim_common.h"

typedef struct adadelta {
  optim_common c; /* lr, step (torch's, which the update does not use);
                   * bufs: square_avg and acc_delta, zero-filled as torch's */
  double rho, eps, weight_decay;
  bool maximize;
} adadelta;

/* The host has checked the ranges, in torch's order (the table's), and
 * refused inf and nan (which torch lets through to poison the weights). */
static int create(lk_host *host, const lk_options *o, void **self) {
  static const optim_spec spec = {.size = sizeof(adadelta),
                                  .step = true,
                                  .lists = 2,
                                  .states = {"square_avg", "acc_delta"}};
  int rc = optim_create(host, o, &spec, 0, self);
  if (rc != 0)
    return rc;
  adadelta *s = *self;
  s->rho = lk_opt_double(o, "rho");
  s->eps = lk_opt_double(o, "eps");
  s->weight_decay = lk_opt_double(o, "weight_decay");
  s->maximize = lk_opt_bool(o, "maximize");
  return 0;
}

/* A checkpoint's values: the rate, the step count, and running averages
 * of squares, never negative (the update takes their square roots). */
static int check_state(void *self) {
  adadelta *s = self;
  int rc = optim_check_state(&s->c);
  if (rc == 0)
    rc = optim_check_squares(&s->c, s->c.bufs);
  return rc ? rc : optim_check_squares(&s->c, s->c.bufs + s->c.n);
}

/* One parameter in double: BUFS square_avg and acc_delta. */
FMA_CLONES static void update_f64(const void *self, const void *scalars,
                                  void *pv, const void *gv, void *const *bufs,
                                  size_t numel) {
  const adadelta *s = self;
  double *p = pv, *sq = bufs[0], *acc = bufs[1];
  const double *grad = gv;
  (void)scalars;
  double neg_lr = -optim_get_lr((void *)s), rho = s->rho, keep = 1 - s->rho;
  double wd = s->weight_decay, eps = s->eps;
  for (size_t k = 0; k < numel; k++) {
    double g = s->maximize ? -grad[k] : grad[k];
    if (wd != 0)
      g = fma(wd, p[k], g);
    sq[k] = fma(keep * g, g, sq[k] * rho);
    double std = sqrt(sq[k] + eps);
    double delta = sqrt(acc[k] + eps) / std * g;
    acc[k] = fma(keep * delta, delta, acc[k] * rho);
    p[k] = fma(neg_lr, delta, p[k]);
  }
}

/* The same in float: torch rounds the Python scalars to the tensor's type. */
FMA_CLONES static void update_f32(const void *self, const void *scalars,
                                  void *pv, const void *gv, void *const *bufs,
                                  size_t numel) {
  const adadelta *s = self;
  float *p = pv, *sq = bufs[0], *acc = bufs[1];
  const float *grad = gv;
  (void)scalars;
  float neg_lr = (float)-optim_get_lr((void *)s), rho = (float)s->rho;
  float keep = (float)(1 - s->rho), wd = (float)s->weight_decay;
  float eps = (float)s->eps;
  for (size_t k = 0; k < numel; k++) {
    float g = s->maximize ? -grad[k] : grad[k];
    if (s->weight_decay != 0)
      g = fmaf(wd, p[k], g);
    sq[k] = fmaf(keep * g, g, sq[k] * rho);
    float std = sqrtf(sq[k] + eps);
    float delta = sqrtf(acc[k] + eps) / std * g;
    acc[k] = fmaf(keep * delta, delta, acc[k] * rho);
    p[k] = fmaf(neg_lr, delta, p[k]);
  }
}

static int step(void *self, lk_tensor *const *params, size_t n,
                lk_closure_fn closure) {
  adadelta *s = self;
  int rc;
  if (!optim_begin(&s->c, params, n, closure, &rc))
    return rc;
  ((double *)s->c.step->data)[0] += 1;
  optim_each(&s->c, params, NULL, update_f64, update_f32);
  return 0;
}

/* In the order torch checks them: the host refuses the first bad one. */
static const lk_option options[] = {
    {"lr", LK_OPT_DOUBLE, "1",
     "coefficient that scales delta before it is applied to the parameters",
     "[0, inf)"},
    {"rho", LK_OPT_DOUBLE, "0.9",
     "coefficient used for computing a running average of squared gradients",
     "[0, 1]"},
    {"eps", LK_OPT_DOUBLE, "1e-6",
     "term added to the denominator to improve numerical stability",
     "[0, inf)"},
    {"weight_decay", LK_OPT_DOUBLE, "0", "weight decay (L2 penalty)",
     "[0, inf)"},
    OPTIM_MAXIMIZE_OPTION,
    {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_OPTIMIZER(
    "adadelta", "Adadelta, as torch.optim.Adadelta", optim_destroy, check_state,
    .step = step, OPTIM_LR_ENTRIES);

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

/* A checkpoint's values: the rate, the step count, and running averages
 * of squares, never negative (the update takes their square roots). */
static int check_state(void *self) {
  adadelta *s = self;
  int rc = optim_check_state(&s->c);
  if (rc == 0)
    rc = optim_check_squares(&s->c, s->c.bufs);
  return rc ? rc : optim_check_squares(&s->c, s->c.bufs + s->c.n);
}

/* One parameter in T (double, or float with each scalar rounded to float
 * as torch rounds the Python scalars to the tensor's type): BUFS
 * square_avg and acc_delta. */
#define ADADELTA_UPDATE(NAME, T, FMA, SQRT)                                    \
  FMA_CLONES static void NAME(const void *self, const void *scalars, void *pv, \
                              const void *gv, void *const *bufs,               \
                              size_t numel) {                                  \
    const adadelta *s = self;                                                  \
    T *p = pv, *sq = bufs[0], *acc = bufs[1];                                  \
    const T *grad = gv;                                                        \
    (void)scalars;                                                             \
    T neg_lr = (T)-optim_get_lr((void *)s), rho = (T)s->rho;                   \
    T keep = (T)(1 - s->rho), wd = (T)s->weight_decay, eps = (T)s->eps;        \
    for (size_t k = 0; k < numel; k++) {                                       \
      T g = s->maximize ? -grad[k] : grad[k];                                  \
      if (s->weight_decay != 0)                                                \
        g = FMA(wd, p[k], g);                                                  \
      sq[k] = FMA(keep * g, g, sq[k] * rho);                                   \
      T std = SQRT(sq[k] + eps);                                               \
      T delta = SQRT(acc[k] + eps) / std * g;                                  \
      acc[k] = FMA(keep * delta, delta, acc[k] * rho);                         \
      p[k] = FMA(neg_lr, delta, p[k]);                                         \
    }                                                                          \
  }
ADADELTA_UPDATE(update_f64, double, fma, sqrt)
ADADELTA_UPDATE(update_f32, float, fmaf, sqrtf)

/* The step's own part: the count, which the update does not use (no
 * scalars). */
static int prepare(void *self, const void **scalars) {
  adadelta *s = self;
  (void)scalars;
  ((double *)s->c.step->data)[0] += 1;
  return 0;
}

/* The host has checked the ranges, in torch's order (the table's), and
 * refused inf and nan (which torch lets through to poison the weights). */
static int create(lk_host *host, const lk_options *o, void **self) {
  static const optim_spec spec = {
      .size = sizeof(adadelta),
      .step = true,
      .lists = 2,
      .states = {"square_avg", "acc_delta"},
      .fields = {OPTIM_FIELD(adadelta, rho, DOUBLE),
                 OPTIM_FIELD(adadelta, eps, DOUBLE),
                 OPTIM_FIELD(adadelta, weight_decay, DOUBLE),
                 OPTIM_FIELD(adadelta, maximize, BOOL)},
      .kernel = {prepare, update_f64, update_f32}};
  return optim_create(host, o, &spec, 0, self);
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
    .step = optim_step, OPTIM_LR_ENTRIES);

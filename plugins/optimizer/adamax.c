/* adamax: Adamax (Adam with the infinity norm) as torch.optim.Adamax 1.13
 * (_single_tensor_adamax), with its option names, defaults and checks.
 *
 * The iterates match torch's to the last bit. Torch's CPU kernels fuse
 * exp_avg.mul_(b1).add_(g, alpha=1-b1) into fma(1-b1, g, m*b1) and
 * grad.add(p, alpha=wd) into fma(wd, p, g); exp_inf is the larger of
 * exp_inf*b2 and |g| + eps (torch.amax: NaN wins), and param.addcdiv_(m,
 * u, value=-clr) rounds each operation (p + (-clr*m)/u), clr being Python
 * float arithmetic, lr / (1 - b1^step). So this file must be compiled with
 * -ffp-contract=off. The step count is torch's float32 tensor's
 * (optim_step_f32). f32 parameters are updated in float with each scalar
 * rounded to float, as torch does.
 *
 * beta1 is host state that a scheduler may change (ABI 1.5's set_momentum,
 * as torch's OneCycleLR sets group['betas']), read at every step. */
#include <math.h>
#include <stdlib.h>

#include <loopkit/loopkit.h>

#include "bundled.h"
#include "fma_clones.h"
#include "optim_common.h"

/* The scalars of one step: beta1, and clr, lr / (1 - b1^step). */
typedef struct adamax_scalars {
  double beta1, clr;
} adamax_scalars;

typedef struct adamax {
  optim_adamlike a; /* bufs: exp_avg and exp_inf, zero-filled as torch's */
  bool maximize;
  adamax_scalars now; /* this step's */
} adamax;

/* torch.amax of two: NaN wins. */
static double amax(double a, double b) {
  return isnan(a) || a > b ? a : b;
}

static float amaxf(float a, float b) {
  return isnan(a) || a > b ? a : b;
}

/* One parameter in T (double, or float with each scalar rounded to float
 * as torch rounds the Python scalars to the tensor's type): BUFS exp_avg
 * and exp_inf. */
#define ADAMAX_UPDATE(NAME, T, FMA, FABS, AMAX)                                \
  FMA_CLONES static void NAME(const void *self, const void *scalars, void *pv, \
                              const void *gv, void *const *bufs,               \
                              size_t numel) {                                  \
    const adamax *s = self;                                                    \
    const adamax_scalars *c = scalars;                                         \
    T *p = pv, *m = bufs[0], *u = bufs[1];                                     \
    const T *grad = gv;                                                        \
    T b1 = (T)c->beta1, k1 = (T)(1 - c->beta1), b2 = (T)s->a.beta2;            \
    T wd = (T)s->a.weight_decay, eps = (T)s->a.eps, neg_clr = (T)-c->clr;      \
    for (size_t k = 0; k < numel; k++) {                                       \
      T g = s->maximize ? -grad[k] : grad[k];                                  \
      if (s->a.weight_decay != 0)                                              \
        g = FMA(wd, p[k], g);                                                  \
      m[k] = FMA(k1, g, m[k] * b1);                                            \
      u[k] = AMAX(u[k] * b2, FABS(g) + eps);                                   \
      p[k] = p[k] + (neg_clr * m[k]) / u[k];                                   \
    }                                                                          \
  }
ADAMAX_UPDATE(update_f64, double, fma, fabs, amax)
ADAMAX_UPDATE(update_f32, float, fmaf, fabsf, amaxf)

/* The step's own part: the count, and its scalars. */
static int prepare(void *self, const void **scalars) {
  adamax *s = self;
  /* torch counts steps per parameter; they all step together here. */
  double step = optim_step_f32(&s->a.c);
  s->now = (adamax_scalars){.beta1 = optim_get_momentum(s)};
  s->now.clr = optim_get_lr(s) / (1 - pow(s->now.beta1, step));
  *scalars = &s->now;
  return 0;
}

/* The host has checked the ranges, in torch's order (the table's), and
 * refused inf and nan (which torch lets through to poison the weights). */
static int create(lk_host *host, const lk_options *o, void **self) {
  static const optim_spec spec = {.size = sizeof(adamax),
                                  .step = true,
                                  .lists = 2,
                                  .states = {"exp_avg", "exp_inf"},
                                  OPTIM_BETA1,
                                  .kernel = {prepare, update_f64, update_f32}};
  int rc = optim_create_adamlike(host, o, &spec, self);
  if (rc == 0)
    ((adamax *)*self)->maximize = lk_opt_bool(o, "maximize");
  return rc;
}

/* In the order torch checks them: the host refuses the first bad one. */
static const lk_option options[] = {OPTIM_ADAMLIKE_OPTIONS("0.002"),
                                    OPTIM_MAXIMIZE_OPTION,
                                    {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_OPTIMIZER(
    "adamax", "Adamax (Adam with the infinity norm), as torch.optim.Adamax",
    optim_destroy, optim_check_adamlike, .step = optim_step,
    OPTIM_MOMENTUM_ENTRIES);

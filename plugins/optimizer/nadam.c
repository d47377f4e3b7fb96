/* nadam: NAdam (Adam with Nesterov momentum) as torch.optim.NAdam 1.13
 * (_single_tensor_nadam), with its option names, defaults and checks (1.13
 * has no maximize for NAdam).
 *
 * The iterates match torch's to the last bit. The momentum cache mu_t =
 * beta1 (1 - 0.5 * 0.96^(t momentum_decay)) is Python float arithmetic;
 * mu_product, their product, is torch's float32 0-d tensor, multiplied in
 * float; the step count is torch's float32 tensor's (optim_step_f32).
 * Torch's CPU kernels fuse exp_avg.mul_(b1).add_(g, alpha=1-b1) into
 * fma(1-b1, g, m*b1), exp_avg_sq.mul_(b2).addcmul_(g, g, value=1-b2) into
 * fma((1-b2)*g, g, v*b2) and grad.add(p, alpha=wd) into fma(wd, p, g);
 * the two param.addcdiv_ round each operation (p + (c*g)/denom, denom
 * being sqrt(v / bc2) + eps). So this file must be compiled with
 * -ffp-contract=off. f32 parameters are updated in float with each scalar
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

/* The scalars of one step: the coefficients of the two addcdiv_, and
 * bias_correction2, in double as torch's Python code computes them. */
typedef struct nadam_scalars {
  double beta1, bc2, c_grad, c_avg;
} nadam_scalars;

typedef struct nadam {
  optim_adamlike a; /* bufs: exp_avg and exp_avg_sq, zero-filled as torch's;
                       f32: mu_product */
  double momentum_decay;
  lk_tensor *mu_product; /* [1] f32 host state, as torch's */
  nadam_scalars now;     /* this step's */
} nadam;

/* A checkpoint's values: the rate, beta1, torch's float32 step count, a
 * product of momentum caches in [0, 1] (1 before the first step, then
 * times each step's beta1 * (1 - 0.5 * 0.96^...), beta1 < 1), and second
 * moments, never negative (the update takes their square roots). */
static int check_state(void *self) {
  nadam *s = self;
  int rc = optim_check_f32_step(&s->a.c);
  if (rc == 0)
    rc = lk_state_check(s->a.c.host, s->mu_product, 0, 1, false);
  return rc ? rc : optim_check_squares(&s->a.c, s->a.c.bufs + s->a.c.n);
}

/* One parameter in T (double, or float with each scalar rounded to float
 * as torch rounds the Python scalars to the tensor's type): BUFS exp_avg
 * and exp_avg_sq. */
#define NADAM_UPDATE(NAME, T, FMA, SQRT)                                       \
  FMA_CLONES static void NAME(const void *self, const void *scalars, void *pv, \
                              const void *gv, void *const *bufs,               \
                              size_t numel) {                                  \
    const nadam *s = self;                                                     \
    const nadam_scalars *c = scalars;                                          \
    T *p = pv, *m = bufs[0], *v = bufs[1];                                     \
    const T *grad = gv;                                                        \
    T b1 = (T)c->beta1, k1 = (T)(1 - c->beta1);                                \
    T b2 = (T)s->a.beta2, k2 = (T)(1 - s->a.beta2);                            \
    T wd = (T)s->a.weight_decay, eps = (T)s->a.eps, bc2 = (T)c->bc2;           \
    T c_grad = (T)c->c_grad, c_avg = (T)c->c_avg;                              \
    for (size_t k = 0; k < numel; k++) {                                       \
      T g = grad[k];                                                           \
      if (s->a.weight_decay != 0)                                              \
        g = FMA(wd, p[k], g);                                                  \
      m[k] = FMA(k1, g, m[k] * b1);                                            \
      v[k] = FMA(k2 * g, g, v[k] * b2);                                        \
      T denom = SQRT(v[k] / bc2) + eps;                                        \
      p[k] = p[k] + (c_grad * g) / denom;                                      \
      p[k] = p[k] + (c_avg * m[k]) / denom;                                    \
    }                                                                          \
  }
NADAM_UPDATE(update_f64, double, fma, sqrt)
NADAM_UPDATE(update_f32, float, fmaf, sqrtf)

/* The step's own part: the count, and its scalars. */
static int prepare(void *self, const void **scalars) {
  nadam *s = self;
  /* torch counts steps per parameter, and keeps a mu_product each; they
   * all step together here. */
  double step = optim_step_f32(&s->a.c), lr = optim_get_lr(s);
  s->now = (nadam_scalars){.beta1 = optim_get_momentum(s)};
  s->now.bc2 = 1 - pow(s->a.beta2, step);
  double mu = s->now.beta1 * (1. - 0.5 * pow(0.96, step * s->momentum_decay));
  double mu_next =
      s->now.beta1 * (1. - 0.5 * pow(0.96, (step + 1) * s->momentum_decay));
  float *mu_product = s->mu_product->data;
  *mu_product = *mu_product * (float)mu;
  float mu_product_next = *mu_product * (float)mu * (float)mu_next;
  s->now.c_grad = -lr * (1. - mu) / (1. - (double)*mu_product);
  s->now.c_avg = -lr * mu_next / (1. - (double)mu_product_next);
  *scalars = &s->now;
  return 0;
}

/* The host has checked the ranges, in torch's order (the table's), and
 * refused inf and nan (which torch lets through to poison the weights). */
static int create(lk_host *host, const lk_options *o, void **self) {
  static const optim_spec spec = {.size = sizeof(nadam),
                                  .step = true,
                                  .f32 = {"mu_product"},
                                  .lists = 2,
                                  .states = {"exp_avg", "exp_avg_sq"},
                                  OPTIM_BETA1,
                                  .kernel = {prepare, update_f64, update_f32}};
  int rc = optim_create_adamlike(host, o, &spec, self);
  if (rc != 0)
    return rc;
  nadam *s = *self;
  s->momentum_decay = lk_opt_double(o, "momentum_decay");
  s->mu_product = s->a.c.f32[0];
  /* torch.tensor(1.) at the first step; a resume overwrites it. */
  *(float *)s->mu_product->data = 1;
  return 0;
}

/* In the order torch checks them: the host refuses the first bad one. */
static const lk_option options[] = {
    OPTIM_ADAMLIKE_OPTIONS("0.002"),
    {"momentum_decay", LK_OPT_DOUBLE, "0.004",
     "momentum decay: step t's momentum is beta1 (1 - 0.5 * 0.96^(t * "
     "momentum_decay))",
     "[0, inf)"},
    {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_OPTIMIZER(
    "nadam", "NAdam (Adam with Nesterov momentum), as torch.optim.NAdam",
    optim_destroy, check_state, .step = optim_step, OPTIM_MOMENTUM_ENTRIES);

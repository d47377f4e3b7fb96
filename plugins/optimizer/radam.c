/* radam: RAdam (rectified Adam) as torch.optim.RAdam 1.13
 * (_single_tensor_radam), with its option names, defaults and checks (1.13
 * has no maximize for RAdam).
 *
 * The iterates match torch's to the last bit. The bias corrections, rho_t
 * and the rectification term are Python float arithmetic; the step count
 * is torch's float32 tensor's (optim_step_f32). Torch's CPU kernels fuse
 * exp_avg.mul_(b1).add_(g, alpha=1-b1) into fma(1-b1, g, m*b1),
 * exp_avg_sq.mul_(b2).addcmul_(g, g, value=1-b2) into
 * fma((1-b2)*g, g, v*b2) and grad.add(p, alpha=wd) into fma(wd, p, g);
 * everything else rounds at each operation, in torch's order: m / bc1,
 * then * lr, then (while rho_t <= 5) subtracted; or times the adaptive
 * rate sqrt(bc2) / (sqrt(v) + eps), which a Python float divided by a
 * tensor computes as (1 / (sqrt(v) + eps)) * sqrt(bc2), then times rect.
 * So this file must be compiled with -ffp-contract=off. f32 parameters
 * are updated in float with each scalar rounded to float, as torch does.
 *
 * beta1 is host state that a scheduler may change (ABI 1.5's set_momentum,
 * as torch's OneCycleLR sets group['betas']), read at every step. */
#include <math.h>
#include <stdlib.h>

#include <loopkit/loopkit.h>

#include "bundled.h"
#include "fma_clones.h"
#include "optim_common.h"

/* The scalars of one step, in double as torch's Python code computes
 * them; rectified: rho_t > 5, and rect and sqrt_bc2 are set. */
typedef struct radam_scalars {
  double beta1, lr, bc1, rect, sqrt_bc2;
  bool rectified;
} radam_scalars;

typedef struct radam {
  optim_adamlike a;  /* bufs: exp_avg and exp_avg_sq, zero-filled as torch's */
  radam_scalars now; /* this step's */
} radam;

/* One parameter in T (double, or float with each scalar rounded to float
 * as torch rounds the Python scalars to the tensor's type): BUFS exp_avg
 * and exp_avg_sq. */
#define RADAM_UPDATE(NAME, T, FMA, SQRT)                                       \
  FMA_CLONES static void NAME(const void *self, const void *scalars, void *pv, \
                              const void *gv, void *const *bufs,               \
                              size_t numel) {                                  \
    const radam *s = self;                                                     \
    const radam_scalars *c = scalars;                                          \
    T *p = pv, *m = bufs[0], *v = bufs[1];                                     \
    const T *grad = gv;                                                        \
    T b1 = (T)c->beta1, k1 = (T)(1 - c->beta1);                                \
    T b2 = (T)s->a.beta2, k2 = (T)(1 - s->a.beta2);                            \
    T wd = (T)s->a.weight_decay, eps = (T)s->a.eps, lr = (T)c->lr;             \
    T bc1 = (T)c->bc1, rect = (T)c->rect, sqrt_bc2 = (T)c->sqrt_bc2;           \
    for (size_t k = 0; k < numel; k++) {                                       \
      T g = grad[k];                                                           \
      if (s->a.weight_decay != 0)                                              \
        g = FMA(wd, p[k], g);                                                  \
      m[k] = FMA(k1, g, m[k] * b1);                                            \
      v[k] = FMA(k2 * g, g, v[k] * b2);                                        \
      T step = m[k] / bc1 * lr;                                                \
      if (c->rectified)                                                        \
        step = step * ((1 / (SQRT(v[k]) + eps)) * sqrt_bc2) * rect;            \
      p[k] = p[k] - step;                                                      \
    }                                                                          \
  }
RADAM_UPDATE(update_f64, double, fma, sqrt)
RADAM_UPDATE(update_f32, float, fmaf, sqrtf)

/* The step's own part: the count, and its scalars. */
static int prepare(void *self, const void **scalars) {
  radam *s = self;
  /* torch counts steps per parameter; they all step together here. */
  double step = optim_step_f32(&s->a.c), b2 = s->a.beta2;
  s->now =
      (radam_scalars){.beta1 = optim_get_momentum(s), .lr = optim_get_lr(s)};
  s->now.bc1 = 1 - pow(s->now.beta1, step);
  double bc2 = 1 - pow(b2, step);
  double rho_inf = 2 / (1 - b2) - 1;
  double rho_t = rho_inf - 2 * step * pow(b2, step) / bc2;
  s->now.rectified = rho_t > 5.;
  if (s->now.rectified) {
    s->now.rect = sqrt((rho_t - 4) * (rho_t - 2) * rho_inf /
                       ((rho_inf - 4) * (rho_inf - 2) * rho_t));
    s->now.sqrt_bc2 = sqrt(bc2);
  }
  *scalars = &s->now;
  return 0;
}

/* The host has checked the ranges, in torch's order (the table's), and
 * refused inf and nan (which torch lets through to poison the weights). */
static int create(lk_host *host, const lk_options *o, void **self) {
  static const optim_spec spec = {.size = sizeof(radam),
                                  .step = true,
                                  .lists = 2,
                                  .states = {"exp_avg", "exp_avg_sq"},
                                  OPTIM_BETA1,
                                  .kernel = {prepare, update_f64, update_f32}};
  return optim_create_adamlike(host, o, &spec, self);
}

/* In the order torch checks them: the host refuses the first bad one. */
static const lk_option options[] = {OPTIM_ADAMLIKE_OPTIONS("0.001"),
                                    {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_OPTIMIZER(
    "radam", "RAdam (rectified Adam), as torch.optim.RAdam", optim_destroy,
    optim_check_adamlike, .step = optim_step, OPTIM_MOMENTUM_ENTRIES);

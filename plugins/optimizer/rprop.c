/* rprop: resilient backpropagation as torch.optim.Rprop 1.13
 * (_single_tensor_rprop), with its option names, defaults and checks.
 *
 * Each element has its own step size, which starts as lr (at the first
 * step, as torch's state init: the rate is not read again, whatever a
 * scheduler sets later) and is multiplied by etaplus when the gradient kept
 * its sign, by etaminus when it changed (and that gradient is then taken
 * as 0), then clamped to step_sizes; the parameter moves by the step size
 * against the gradient's sign. torch.sign gives 0 for 0 and NaN. The
 * arithmetic is exact but for the step sizes' products, and
 * param.addcmul_(sign, step_size, value=-1) is fma(-sign, step_size, p);
 * f32 parameters are updated in float with each scalar rounded to float,
 * as torch does. Rprop has no momentum for a scheduler to cycle. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include <loopkit/loopkit.h>

#include "bundled.h"
#include "fma_clones.h"
#include "optim_common.h"

/* The step's: the step sizes start as lr at the first. */
typedef struct rprop_scalars {
  bool first;
  double lr;
} rprop_scalars;

typedef struct rprop {
  optim_common c; /* lr, step (torch's, a Python int); bufs: prev and
                   * step_size */
  double etaminus, etaplus, step_size_min, step_size_max;
  bool maximize;
  rprop_scalars now; /* this step's */
} rprop;

/* A checkpoint's values: the rate, the step count, and, with step_sizes
 * >= 0, step sizes that are never negative (one would move a parameter
 * along its gradient). */
static int check_state(void *self) {
  rprop *s = self;
  int rc = optim_check_state(&s->c);
  if (rc != 0 || s->step_size_min < 0 || s->step_size_max < 0)
    return rc;
  for (size_t i = 0; rc == 0 && i < s->c.n; i++)
    rc = lk_state_check(s->c.host, s->c.bufs[s->c.n + i], 0, DBL_MAX, false);
  return rc;
}

/* torch.sign: (0 < x) - (x < 0), so 0 for 0 and NaN. */
static double sign(double x) {
  return (double)((0 < x) - (x < 0));
}

static float signf(float x) {
  return (float)((0 < x) - (x < 0));
}

/* torch.clamp: NaN stays NaN; min > max gives max. */
static double clamp(double x, double lo, double hi) {
  x = x < lo ? lo : x;
  return hi < x ? hi : x;
}

static float clampf(float x, float lo, float hi) {
  x = x < lo ? lo : x;
  return hi < x ? hi : x;
}

/* One parameter in T (double, or float with each scalar rounded to float
 * as torch rounds the Python scalars to the tensor's type): BUFS prev and
 * step_size. */
#define RPROP_UPDATE(NAME, T, FMA, SIGN, CLAMP)                                \
  FMA_CLONES static void NAME(const void *self, const void *scalars, void *pv, \
                              const void *gv, void *const *bufs,               \
                              size_t numel) {                                  \
    const rprop *s = self;                                                     \
    T *p = pv, *prev = bufs[0], *size = bufs[1];                               \
    const T *grad = gv;                                                        \
    bool first = ((const rprop_scalars *)scalars)->first;                      \
    T lr = (T)((const rprop_scalars *)scalars)->lr;                            \
    T minus = (T)s->etaminus, plus = (T)s->etaplus;                            \
    T lo = (T)s->step_size_min, hi = (T)s->step_size_max;                      \
    for (size_t k = 0; k < numel; k++) {                                       \
      T g = s->maximize ? -grad[k] : grad[k];                                  \
      if (first)                                                               \
        size[k] = lr;                                                          \
      T dir = SIGN(g * prev[k]);                                               \
      T factor = dir > 0 ? plus : dir < 0 ? minus : 1;                         \
      size[k] = CLAMP(size[k] * factor, lo, hi);                               \
      if (dir < 0) /* torch: grad[sign.eq(etaminus)] = 0 */                    \
        g = 0;                                                                 \
      p[k] = FMA(-SIGN(g), size[k], p[k]);                                     \
      prev[k] = g;                                                             \
    }                                                                          \
  }
RPROP_UPDATE(update_f64, double, fma, sign, clamp)
RPROP_UPDATE(update_f32, float, fmaf, signf, clampf)

/* The step's own part: the count, and whether this is the first step
 * (the scalars). */
static int prepare(void *self, const void **scalars) {
  rprop *s = self;
  /* torch fills the step sizes with lr at the first step (its state init)
   * and counts steps per parameter; they all step together here. */
  double *count = s->c.step->data;
  s->now = (rprop_scalars){*count == 0, optim_get_lr(s)};
  *scalars = &s->now;
  *count += 1;
  return 0;
}

/* The host has checked lr's range and that each eta is > 0; the rest of
 * torch's check, 0 < etaminus < 1 < etaplus, is one value against
 * another. step_sizes has none in torch. */
static int create(lk_host *host, const lk_options *o, void **self) {
  double etas[2] = {0, 0}, sizes[2] = {0, 0};
  int rc =
      optim_two(host, o, "etas", "etaminus,etaplus (default 0.5,1.2)", etas);
  if (rc == 0 && !(etas[0] < 1 && 1 < etas[1]))
    rc = lk_fail(host, LK_ECONFIG,
                 "option etas = %g,%g: invalid eta values, 0 < etaminus < 1 "
                 "< etaplus is needed",
                 etas[0], etas[1]);
  if (rc == 0)
    rc =
        optim_two(host, o, "step_sizes",
                  "the minimal and maximal step size (default 1e-6,50)", sizes);
  if (rc != 0)
    return rc;
  static const optim_spec spec = {.size = sizeof(rprop),
                                  .step = true,
                                  .lists = 2,
                                  .states = {"prev", "step_size"},
                                  .kernel = {prepare, update_f64, update_f32}};
  if ((rc = optim_create(host, o, &spec, 0, self)) != 0)
    return rc;
  rprop *s = *self;
  s->etaminus = etas[0];
  s->etaplus = etas[1];
  s->step_size_min = sizes[0];
  s->step_size_max = sizes[1];
  s->maximize = lk_opt_bool(o, "maximize");
  return 0;
}

/* In the order torch checks them: the host refuses a bad lr first. */
static const lk_option options[] = {
    {"lr", LK_OPT_DOUBLE, "0.01",
     "learning rate: every step size's first value (a later rate is not "
     "read, as in torch)",
     "[0, inf)"},
    {"etas", LK_OPT_DOUBLES, "0.5,1.2",
     "etaminus,etaplus: multiplicative decrease and increase factors "
     "(0 < etaminus < 1 < etaplus)",
     "(0, inf)"},
    {"step_sizes", LK_OPT_DOUBLES, "1e-6,50",
     "a pair of minimal and maximal allowed step sizes", NULL},
    OPTIM_MAXIMIZE_OPTION,
    {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_OPTIMIZER(
    "rprop", "resilient backpropagation, as torch.optim.Rprop", optim_destroy,
    check_state, .step = optim_step, OPTIM_LR_ENTRIES);

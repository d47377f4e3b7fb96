/* asgd: averaged stochastic gradient descent as torch.optim.ASGD 1.13
 * (_single_tensor_asgd), with its option names, defaults and checks.
 *
 * Each step decays the parameters by 1 - lambd * eta, takes a gradient
 * step of eta, and updates ax, the running average of the parameters
 * (which the update does not read: it is the averaged model, kept as
 * state). eta and mu are torch's float32 0-d tensors: eta starts as the
 * rate at the first step, and after step t becomes
 * lr / (1 + lambd * lr * t)^alpha, mu 1 / max(1, t - t0), each computed in
 * Python float (double) and rounded to float. The step count is torch's
 * float32 tensor's too (optim_step_f32).
 *
 * The iterates match torch's to the last bit. Torch's CPU kernels fuse
 * grad.add(p, alpha=wd) into fma(wd, p, g) and param.add_(g, alpha=-eta)
 * into fma(-eta, g, p); param.mul_(1 - lambd*eta) and
 * ax.add_(param.sub(ax).mul(mu)) round at each operation. So this file
 * must be compiled with -ffp-contract=off. f32 parameters are updated in
 * float with each scalar rounded to float, as torch does. ASGD has no
 * momentum for a scheduler to cycle. */
#include <math.h>
#include <stdlib.h>

#include <loopkit/loopkit.h>

#include "bundled.h"
#include "fma_clones.h"
#include "optim_common.h"

/* The step's eta and mu. */
typedef struct asgd_scalars {
  double eta, mu;
} asgd_scalars;

typedef struct asgd {
  optim_common c; /* lr, step (torch's state_steps); bufs: ax */
  double lambd, alpha, t0, weight_decay;
  bool maximize;
  lk_tensor *eta, *mu; /* [1] f32 host state, as torch's */
  asgd_scalars now;    /* this step's eta and mu */
} asgd;

/* A checkpoint's values: the rate, torch's float32 step count, and mu,
 * which is 1 / max(1, t - t0) (eta may be any finite number: lambd and
 * alpha have no range in torch). */
static int check_state(void *self) {
  asgd *s = self;
  int rc = optim_check_f32_step(&s->c);
  return rc ? rc : lk_state_check(s->c.host, s->mu, 0, 1, false);
}

/* One parameter in T (double, or float with each scalar rounded to float
 * as torch rounds the Python scalars to the tensor's type; eta and mu are
 * floats already): BUFS ax. */
#define ASGD_UPDATE(NAME, T, FMA)                                              \
  FMA_CLONES static void NAME(const void *self, const void *scalars, void *pv, \
                              const void *gv, void *const *bufs,               \
                              size_t numel) {                                  \
    const asgd *s = self;                                                      \
    T *p = pv, *ax = bufs[0];                                                  \
    const T *grad = gv;                                                        \
    double eta = ((const asgd_scalars *)scalars)->eta;                         \
    double mu = ((const asgd_scalars *)scalars)->mu;                           \
    T decay = (T)(1 - s->lambd * eta), wd = (T)s->weight_decay;                \
    T neg_eta = (T)-eta, m = (T)mu;                                            \
    for (size_t k = 0; k < numel; k++) {                                       \
      T g = s->maximize ? -grad[k] : grad[k];                                  \
      if (s->weight_decay != 0)                                                \
        g = FMA(wd, p[k], g);                                                  \
      p[k] = p[k] * decay;                                                     \
      p[k] = FMA(neg_eta, g, p[k]);                                            \
      ax[k] = mu != 1 ? ax[k] + (p[k] - ax[k]) * m : p[k];                     \
    }                                                                          \
  }
ASGD_UPDATE(update_f64, double, fma)
ASGD_UPDATE(update_f32, float, fmaf)

/* The step's own part: the count, and this step's eta and mu (the
 * scalars), which the states then leave for the next step's. */
static int prepare(void *self, const void **scalars) {
  asgd *s = self;
  float *eta = s->eta->data, *mu = s->mu->data;
  double lr = optim_get_lr(s);
  if (((double *)s->c.step->data)[0] == 0) { /* torch's state init */
    *eta = (float)lr;
    *mu = 1;
  }
  /* torch counts steps per parameter; they all step together here. */
  double step = optim_step_f32(&s->c);
  s->now = (asgd_scalars){*eta, *mu};
  *scalars = &s->now;
  *eta = (float)(lr / pow(1 + s->lambd * lr * step, s->alpha));
  double t = step - s->t0;
  *mu = (float)(1 / (t > 1 ? t : 1)); /* Python's max(1, t) */
  return 0;
}

/* The host has checked the ranges, in torch's order (the table's), and
 * refused inf and nan (which torch lets through to poison the weights). */
static int create(lk_host *host, const lk_options *o, void **self) {
  static const optim_spec spec = {
      .size = sizeof(asgd),
      .step = true,
      .f32 = {"eta", "mu"},
      .lists = 1,
      .states = {"ax"},
      .fields = {OPTIM_FIELD(asgd, lambd, DOUBLE),
                 OPTIM_FIELD(asgd, alpha, DOUBLE),
                 OPTIM_FIELD(asgd, t0, DOUBLE),
                 OPTIM_FIELD(asgd, weight_decay, DOUBLE),
                 OPTIM_FIELD(asgd, maximize, BOOL)},
      .kernel = {prepare, update_f64, update_f32}};
  int rc = optim_create(host, o, &spec, 0, self);
  if (rc != 0)
    return rc;
  asgd *s = *self;
  s->eta = s->c.f32[0];
  s->mu = s->c.f32[1];
  /* torch sets eta and mu at the first step; a resume overwrites them. */
  *(float *)s->mu->data = 1;
  return 0;
}

/* torch checks lr and weight_decay only, in that order: the host refuses
 * the first bad one. */
static const lk_option options[] = {
    {"lr", LK_OPT_DOUBLE, "0.01", "learning rate", "[0, inf)"},
    {"lambd", LK_OPT_DOUBLE, "0.0001", "decay term", NULL},
    {"alpha", LK_OPT_DOUBLE, "0.75", "power for eta update", NULL},
    {"t0", LK_OPT_DOUBLE, "1000000", "point at which to start averaging", NULL},
    {"weight_decay", LK_OPT_DOUBLE, "0", "weight decay (L2 penalty)",
     "[0, inf)"},
    OPTIM_MAXIMIZE_OPTION,
    {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_OPTIMIZER(
    "asgd", "averaged stochastic gradient descent, as torch.optim.ASGD",
    optim_destroy, check_state, .step = optim_step, OPTIM_LR_ENTRIES);

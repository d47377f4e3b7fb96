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

#include "fma_clones.h"
#include "optim_common.h"

typedef struct rprop {
  optim_common c; /* lr, step (torch's, a Python int) */
  double etaminus, etaplus, step_size_min, step_size_max;
  bool maximize;
  /* Host state, one tensor per parameter each (c.bufs). */
  lk_tensor **prev, **step_size;
} rprop;

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
  void *mem = NULL;
  rc = optim_new(host, sizeof(rprop), 2, lk_opt_double(o, "lr"), true, &mem);
  if (rc != 0)
    return rc;
  rprop *s = mem;
  s->etaminus = etas[0];
  s->etaplus = etas[1];
  s->step_size_min = sizes[0];
  s->step_size_max = sizes[1];
  s->maximize = lk_opt_bool(o, "maximize");
  s->prev = s->c.bufs;
  s->step_size = s->c.bufs + s->c.n;
  rc = optim_param_states(&s->c, "prev", s->prev);
  if (rc == 0)
    rc = optim_param_states(&s->c, "step_size", s->step_size);
  if (rc != 0) {
    optim_destroy(s);
    return rc;
  }
  *self = s;
  return 0;
}

/* A checkpoint's values: the rate, the step count, and, with step_sizes
 * >= 0, step sizes that are never negative (one would move a parameter
 * along its gradient). */
static int check_state(void *self) {
  rprop *s = self;
  int rc = optim_check_state(&s->c);
  if (rc != 0 || s->step_size_min < 0 || s->step_size_max < 0)
    return rc;
  for (size_t i = 0; rc == 0 && i < s->c.n; i++)
    rc = lk_state_check(s->c.host, s->step_size[i], 0, DBL_MAX, false);
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

/* One parameter in double. FIRST: the step sizes start as LR. */
FMA_CLONES static void update_f64(const rprop *s, bool first, double lr,
                                  double *p, const double *grad, double *prev,
                                  double *size, size_t numel) {
  double minus = s->etaminus, plus = s->etaplus;
  double lo = s->step_size_min, hi = s->step_size_max;
  for (size_t k = 0; k < numel; k++) {
    double g = s->maximize ? -grad[k] : grad[k];
    if (first)
      size[k] = lr;
    double dir = sign(g * prev[k]);
    double factor = dir > 0 ? plus : dir < 0 ? minus : 1;
    size[k] = clamp(size[k] * factor, lo, hi);
    if (dir < 0) /* torch: grad[sign.eq(etaminus)] = 0 */
      g = 0;
    p[k] = fma(-sign(g), size[k], p[k]);
    prev[k] = g;
  }
}

/* The same in float: torch rounds the Python scalars to the tensor's type. */
FMA_CLONES static void update_f32(const rprop *s, bool first, double rate,
                                  float *p, const float *grad, float *prev,
                                  float *size, size_t numel) {
  float minus = (float)s->etaminus, plus = (float)s->etaplus;
  float lo = (float)s->step_size_min, hi = (float)s->step_size_max;
  float lr = (float)rate;
  for (size_t k = 0; k < numel; k++) {
    float g = s->maximize ? -grad[k] : grad[k];
    if (first)
      size[k] = lr;
    float dir = signf(g * prev[k]);
    float factor = dir > 0 ? plus : dir < 0 ? minus : 1;
    size[k] = clampf(size[k] * factor, lo, hi);
    if (dir < 0)
      g = 0;
    p[k] = fmaf(-signf(g), size[k], p[k]);
    prev[k] = g;
  }
}

static int step(void *self, lk_tensor *const *params, size_t n,
                lk_closure_fn closure) {
  rprop *s = self;
  if (closure && !isfinite(closure()))
    return 0; /* the evaluation failed or gave no loss: leave params be */
  int rc = optim_check_params(&s->c, params, n, s->prev);
  if (rc != 0)
    return rc;
  /* torch fills the step sizes with lr at the first step (its state init)
   * and counts steps per parameter; they all step together here. */
  double *count = s->c.step->data;
  bool first = *count == 0;
  *count += 1;
  double lr = optim_get_lr(s);
  for (size_t i = 0; i < n; i++) {
    lk_tensor *p = params[i];
    if (p->dtype == LK_F64)
      update_f64(s, first, lr, p->data, p->grad, s->prev[i]->data,
                 s->step_size[i]->data, p->numel);
    else
      update_f32(s, first, lr, p->data, p->grad, s->prev[i]->data,
                 s->step_size[i]->data, p->numel);
  }
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

static const lk_optimizer_ops optimizer_ops = {
    .step = step, .get_lr = optim_get_lr, .set_lr = optim_set_lr};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "rprop",
    .version = "1.0",
    .summary = "resilient backpropagation, as torch.optim.Rprop",
    .options = options,
    .create = create,
    .destroy = optim_destroy,
    .optimizer = &optimizer_ops,
    .check_state = check_state,
};

/* rmsprop: RMSprop as torch.optim.RMSprop 1.13 (_single_tensor_rmsprop),
 * with its option names, defaults and checks.
 *
 * The iterates match torch's to the last bit. Torch's CPU kernels fuse
 * square_avg.mul_(a).addcmul_(g, g, value=1-a) into fma((1-a)*g, g, v*a),
 * grad_avg.mul_(a).add_(g, alpha=1-a) into fma(1-a, g, ga*a),
 * square_avg.addcmul(ga, ga, value=-1) into fma(-ga, ga, v),
 * grad.add(p, alpha=wd) into fma(wd, p, g) and param.add_(buf, alpha=-lr)
 * into fma(-lr, buf, p); addcdiv_ rounds each operation (p + (-lr*g)/avg,
 * buf*m + g/avg). So this file must be compiled with -ffp-contract=off. f32
 * parameters are updated in float with each scalar rounded to float.
 *
 * The momentum is host state that a scheduler may change (ABI 1.5's
 * set_momentum, as torch's OneCycleLR sets group['momentum']), read at
 * every step; a step with momentum 0 leaves the buffers alone, as torch's.
 * Torch's first step makes the buffers, zero, only if the momentum is > 0
 * then, whatever it was at create, and a later step with momentum > 0
 * without them raises KeyError: 'momentum_buffer'. Host state exists from
 * setup on, so the buffers are made when they may be needed (at create
 * with momentum > 0, or when a scheduler sets the momentum in its create,
 * as onecycle and cyclic do), and has_momentum_buffer records what the
 * first step decided: 1, torch's state holds them; 0 after a first step
 * with momentum 0, and a step with momentum > 0 then fails as torch's. */
#include <math.h>
#include <stdlib.h>

#include <loopkit/loopkit.h>

#include "bundled.h"
#include "optim_common.h"

typedef struct rmsprop {
  optim_common c; /* lr, step (as torch counts), momentum */
  double alpha, eps, weight_decay;
  bool centered, maximize;
  bool kept; /* momentum_buffer and has_momentum_buffer exist */
  /* Host state, one tensor per parameter each (c.bufs), zero-filled as
   * torch's: square_avg, momentum_buffer only once made (kept), grad_avg
   * only when centered. */
  /* [1] host state, with the buffers: 1 once the first step had momentum
   * > 0 (torch's state holds momentum_buffer). */
  lk_tensor *has_buffer;
  double m; /* this step's momentum: its scalars */
} rmsprop;

/* The momentum buffers, zero, and has_momentum_buffer = 0, as host state. */
static int make_buffers(optim_common *c) {
  rmsprop *s = (rmsprop *)c;
  size_t one = 1;
  int rc = lk_host_add_state(c->host, "has_momentum_buffer", LK_F64, 1, &one,
                             &s->has_buffer);
  return rc ? rc : optim_param_states(c, "momentum_buffer", c->bufs + c->n);
}

/* A checkpoint's values: the rate, the step count, the momentum (0
 * without buffers), square averages that are never negative, and the
 * buffers' flag: 0 before the first step, and with buffers no step has
 * filled. A first step without buffers and a momentum > 0 now is a state
 * the run that wrote it could not step from either (torch's KeyError):
 * refused here, so that a checkpoint the resume accepts is one that
 * trains. */
static int check_state(void *self) {
  rmsprop *s = self;
  int rc = optim_check_state(&s->c);
  if (rc == 0)
    rc = optim_check_squares(&s->c, s->c.bufs);
  if (rc != 0 || !s->kept)
    return rc ? rc : optim_check_no_buffers(&s->c);
  double steps = ((const double *)s->c.step->data)[0];
  rc = lk_state_check(s->c.host, s->has_buffer, 0, steps > 0 ? 1 : 0, true);
  if (rc != 0 || ((const double *)s->has_buffer->data)[0] != 0)
    return rc;
  rc = optim_check_unfilled(&s->c, s->c.bufs + s->c.n, s->has_buffer);
  double m = optim_get_momentum(s);
  if (rc == 0 && steps > 0 && m > 0)
    rc = lk_fail(s->c.host, LK_EFORMAT,
                 "state %s[0] = %g, but %s[0] = 0 says the first step had "
                 "momentum 0 and so made no momentum buffer, as torch's "
                 "RMSprop makes it only at a first step with momentum > 0: "
                 "the next step cannot run (torch raises KeyError: "
                 "'momentum_buffer' there)",
                 s->c.momentum->name, m, s->has_buffer->name);
  return rc;
}

/* A scheduler's momentum: the buffers made if it comes during setup. */
static int set_momentum(void *self, double momentum) {
  rmsprop *s = self;
  return optim_set_momentum_kept(&s->c, momentum, &s->kept, make_buffers);
}

/* One parameter in T (double, or float with each scalar rounded to float
 * as torch rounds the Python scalars to the tensor's type), with momentum
 * M (the scalars): BUFS square_avg, momentum_buffer (unused while M is 0)
 * and grad_avg (NULL when not centered). */
#define RMSPROP_UPDATE(NAME, T, FMA, SQRT)                                     \
  static void NAME(const void *self, const void *scalars, void *pv,            \
                   const void *gv, void *const *bufs, size_t numel) {          \
    const rmsprop *s = self;                                                   \
    double momentum = *(const double *)scalars;                                \
    T *p = pv, *sq = bufs[0], *buf = momentum > 0 ? bufs[1] : NULL;            \
    T *ga = bufs[2];                                                           \
    const T *grad = gv;                                                        \
    T neg_lr = (T)-optim_get_lr((void *)s), a = (T)s->alpha;                   \
    T keep = (T)(1 - s->alpha), wd = (T)s->weight_decay;                       \
    T eps = (T)s->eps, m = (T)momentum;                                        \
    for (size_t k = 0; k < numel; k++) {                                       \
      T g = s->maximize ? -grad[k] : grad[k];                                  \
      if (s->weight_decay != 0)                                                \
        g = FMA(wd, p[k], g);                                                  \
      sq[k] = FMA(keep * g, g, sq[k] * a);                                     \
      if (ga)                                                                  \
        ga[k] = FMA(keep, g, ga[k] * a);                                       \
      T avg = (ga ? SQRT(FMA(-ga[k], ga[k], sq[k])) : SQRT(sq[k])) + eps;      \
      if (buf)                                                                 \
        buf[k] = buf[k] * m + g / avg;                                         \
      p[k] = buf ? FMA(neg_lr, buf[k], p[k]) : p[k] + (neg_lr * g) / avg;      \
    }                                                                          \
  }
RMSPROP_UPDATE(update_f64, double, fma, sqrt)
RMSPROP_UPDATE(update_f32, float, fmaf, sqrtf)

/* The step's own part: the count, and its momentum (the scalars), which
 * needs the buffers torch made at the first step. */
static int prepare(void *self, const void **scalars) {
  rmsprop *s = self;
  double m = s->m = optim_get_momentum(s);
  double *steps = s->c.step->data;
  if (m > 0 && !s->kept) /* set_momentum and check_state refuse it */
    return lk_fail(s->c.host, LK_ESTATE, "momentum %g without momentum buffers",
                   m);
  double *has_buffer = s->kept ? s->has_buffer->data : NULL;
  if (m > 0 && *steps == 0)
    *has_buffer = 1; /* torch's state is made now, with momentum_buffer */
  else if (m > 0 && *has_buffer == 0)
    return lk_fail(s->c.host, LK_ECONFIG,
                   "momentum %g at step %.17g, but the first step had "
                   "momentum 0 and so made no momentum buffer, as torch's "
                   "RMSprop makes it only at a first step with momentum > 0 "
                   "(it raises KeyError: 'momentum_buffer' here): start the "
                   "momentum above 0 (a scheduler's first value)",
                   m, *steps + 1);
  *steps += 1;
  *scalars = &s->m;
  return 0;
}

/* The host has checked the ranges, in torch's order (the table's), and
 * refused inf and nan (which torch lets through to poison the weights). */
static int create(lk_host *host, const lk_options *o, void **self) {
  static const optim_spec spec = {
      .size = sizeof(rmsprop),
      .step = true,
      .lists = 3,
      .states = {"square_avg"},
      OPTIM_MOMENTUM,
      .fields = {OPTIM_FIELD(rmsprop, alpha, DOUBLE),
                 OPTIM_FIELD(rmsprop, eps, DOUBLE),
                 OPTIM_FIELD(rmsprop, weight_decay, DOUBLE),
                 OPTIM_FIELD(rmsprop, centered, BOOL),
                 OPTIM_FIELD(rmsprop, maximize, BOOL)},
      .kernel = {prepare, update_f64, update_f32}};
  double momentum = lk_opt_double(o, "momentum");
  int rc = optim_create(host, o, &spec, momentum, self);
  if (rc != 0)
    return rc;
  rmsprop *s = *self;
  if (momentum > 0 && (rc = make_buffers(&s->c)) == 0)
    s->kept = true;
  if (rc == 0 && s->centered)
    rc = optim_param_states(&s->c, "grad_avg", s->c.bufs + 2 * s->c.n);
  if (rc != 0)
    optim_destroy(s);
  return rc;
}

/* In the order torch checks them: the host refuses the first bad one. */
static const lk_option options[] = {
    {"lr", LK_OPT_DOUBLE, "0.01", "learning rate", "[0, inf)"},
    {"eps", LK_OPT_DOUBLE, "1e-8",
     "added to the denominator for numerical stability", "[0, inf)"},
    {"momentum", LK_OPT_DOUBLE, "0", "momentum factor", "[0, inf)"},
    {"weight_decay", LK_OPT_DOUBLE, "0", "L2 penalty added to the gradient",
     "[0, inf)"},
    {"alpha", LK_OPT_DOUBLE, "0.99",
     "smoothing constant of the running average of the squared gradient",
     "[0, inf)"},
    {"centered", LK_OPT_BOOL, "false",
     "normalize by an estimate of the gradient's variance (subtracting the "
     "squared running average of the gradient)",
     NULL},
    OPTIM_MAXIMIZE_OPTION,
    {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_OPTIMIZER(
    "rmsprop", "RMSprop, as torch.optim.RMSprop", optim_destroy, check_state,
    .step = optim_step, .get_lr = optim_get_lr, .set_lr = optim_set_lr,
    .get_momentum = optim_get_momentum, .set_momentum = set_momentum);

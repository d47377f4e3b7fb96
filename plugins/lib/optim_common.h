/* What the optimizer plugins share: the start of create (the parameters,
 * the struct, the per-parameter buffer lists, the learning rate and step
 * counter as host state), the learning rate entries, the momentum a
 * scheduler may cycle (host state too, held to its option's range) and its
 * entries, the momentum buffers a scheduler may bring, the checks every step
 * makes before it touches a parameter, and the check of the state a
 * checkpoint restores. Their options' ranges are declared in their option
 * tables and enforced by the host (ABI 1.4), so nothing here checks them.
 * Static inline so that each plugin stays one shared object that exports
 * nothing but its descriptor.
 *
 * plugins/optimizer/sgd.c is also built against the frozen headers of ABI 1.2
 * and 1.3 (tests/abi): what those lack is behind LK_ABI_MINOR. */
#ifndef LOOPKIT_PLUGINS_OPTIM_COMMON_H
#define LOOPKIT_PLUGINS_OPTIM_COMMON_H

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

/* torch's maximize option, which its first-order optimizers share. */
#define OPTIM_MAXIMIZE_OPTION                                                  \
  {                                                                            \
    "maximize", LK_OPT_BOOL, "false",                                          \
        "maximize the objective instead of minimizing it", NULL                \
  }

/* The first member of each optimizer's struct. */
typedef struct optim_common {
  lk_host *host;
  lk_tensor *lr;   /* [1] f64, host state: a scheduler changes it */
  lk_tensor *step; /* [1] f64, host state: steps taken; NULL: not kept */
  /* [1] f64, host state: what a scheduler cycles (torch's momentum, or
   * beta1 of the adam family), read at every step; NULL: none. */
  lk_tensor *momentum;
  /* What it may be: >= 0 and below momentum_below, the range its option
   * momentum_option declares (torch's check in create). A scheduler's value
   * and a checkpoint's are held to it too. */
  double momentum_below;
  const char *momentum_option;
  size_t n;         /* parameters at create time */
  lk_tensor **bufs; /* lists x n per-parameter buffers, in one block */
} optim_common;

/* The run's parameters; a config error when the model registered none. */
static inline int optim_params(lk_host *host, lk_tensor *const **params,
                               size_t *n) {
  *params = lk_host_params(host, n);
  if (*n == 0)
    return lk_fail(host, LK_ECONFIG,
                   "no parameters to optimize (the model registered none)");
  return 0;
}

static inline void optim_destroy(void *self) {
  optim_common *c = self;
  free(c->bufs);
  free(c);
}

/* The start of create: *OUT gets a zeroed struct of SIZE bytes that begins
 * with an optim_common, with room for LISTS lists of one buffer per
 * parameter (c->bufs, c->bufs + n, ...), and the host state "lr" = LR,
 * then, with STEP, "step" = 0. */
static inline int optim_new(lk_host *host, size_t size, size_t lists, double lr,
                            bool step, void **out) {
  size_t n;
  lk_tensor *const *params;
  int rc = optim_params(host, &params, &n);
  if (rc != 0)
    return rc;
  optim_common *c = calloc(1, size);
  if (!c || (lists && !(c->bufs = calloc(lists * n, sizeof *c->bufs)))) {
    free(c);
    return lk_fail(host, LK_ENOMEM, "out of memory");
  }
  c->host = host;
  c->n = n;
  size_t one = 1;
  rc = lk_host_add_state(host, "lr", LK_F64, 1, &one, &c->lr);
  if (rc == 0 && step)
    rc = lk_host_add_state(host, "step", LK_F64, 1, &one, &c->step);
  if (rc != 0) {
    optim_destroy(c);
    return rc;
  }
  *(double *)c->lr->data = lr;
  *out = c;
  return 0;
}

/* A list option of two values (betas, etas): OUT gets them; a config
 * error naming NAME and what it means otherwise (a range cannot say how
 * many values there are). */
static inline int optim_two(lk_host *host, const lk_options *o,
                            const char *name, const char *meaning,
                            double out[2]) {
  size_t n = 0;
  const double *v = lk_opt_doubles(o, name, &n);
  if (!v || n != 2)
    return lk_fail(host, LK_ECONFIG, "option %s has %zu values: give two, %s",
                   name, n, meaning);
  out[0] = v[0];
  out[1] = v[1];
  return 0;
}

/* torch 1.13's step count of Adamax, ASGD, NAdam and RAdam is a float32
 * 0-d tensor (torch.tensor(0.)) that each step adds 1 to: it counts
 * exactly up to 2^24 and stays there. The new count, kept in c->step. */
#define OPTIM_F32_MAX_COUNT 16777216.0
static inline double optim_step_f32(optim_common *c) {
  double *step = c->step->data;
  *step = (double)((float)*step + 1.0f);
  return *step;
}

/* OUT[i]: the state "PREFIX.PARAM" shaped like parameter i, zero-filled. */
static inline int optim_param_states(const optim_common *c, const char *prefix,
                                     lk_tensor **out) {
#if LK_ABI_MINOR >= 4
  return lk_host_add_param_states(c->host, prefix, out, c->n);
#else /* the frozen headers of tests/abi have no lk_host_add_param_states */
  size_t n;
  lk_tensor *const *params = lk_host_params(c->host, &n);
  for (size_t i = 0; i < c->n; i++) {
    const lk_tensor *p = params[i];
    char name[256];
    if (snprintf(name, sizeof name, "%s.%s", prefix, p->name) >=
        (int)sizeof name)
      return lk_fail(c->host, LK_EINVAL,
                     "parameter name \"%s\" is too long for its %s buffer's "
                     "name",
                     p->name, prefix);
    int rc =
        lk_host_add_state(c->host, name, p->dtype, p->ndim, p->shape, &out[i]);
    if (rc != 0)
      return rc;
  }
  return 0;
#endif
}

static inline double optim_get_lr(void *self) {
  return *(const double *)((const optim_common *)self)->lr->data;
}

static inline void optim_set_lr(void *self, double lr) {
  *(double *)((optim_common *)self)->lr->data = lr;
}

/* The host state NAME ("momentum", "beta1") = VALUE, which get_momentum
 * and set_momentum (ABI 1.5) reach, from option OPTION (VALUE in its range
 * [0, BELOW): BELOW 1 for betas, INFINITY for a momentum). It exists
 * whatever the headers, so that a build against older ones writes the same
 * checkpoints. On failure the caller destroys C. */
static inline int optim_add_momentum(optim_common *c, const char *name,
                                     double value, const char *option,
                                     double below) {
  size_t one = 1;
  c->momentum_below = below;
  c->momentum_option = option;
  int rc = lk_host_add_state(c->host, name, LK_F64, 1, &one, &c->momentum);
  if (rc == 0)
    *(double *)c->momentum->data = value;
  return rc;
}

static inline double optim_get_momentum(void *self) {
  return *(const double *)((const optim_common *)self)->momentum->data;
}

/* Before a step touches anything: the parameters are those of create, and
 * each is like its buffer BUF[i] (BUF NULL: no buffers). */
static inline int optim_check_params(const optim_common *c,
                                     lk_tensor *const *params, size_t n,
                                     lk_tensor *const *buf) {
  if (n != c->n)
    return lk_fail(c->host, LK_ESTATE,
                   "called with %zu parameters, created with %zu", n, c->n);
  for (size_t i = 0; buf && i < n; i++)
    if (buf[i]->numel != params[i]->numel || buf[i]->dtype != params[i]->dtype)
      return lk_fail(c->host, LK_ESTATE,
                     "parameter %s does not match its buffer %s",
                     params[i]->name, buf[i]->name);
  return 0;
}

/* ---- optimizers of a flat vector of doubles (C libraries) --------------- */

/* The run's parameters, each f64 or f32, and their elements in all. */
static inline int optim_flat_params(lk_host *host, lk_tensor *const **params,
                                    size_t *np, size_t *n) {
  int rc = optim_params(host, params, np);
  *n = 0;
  for (size_t i = 0; rc == 0 && i < *np; i++) {
    const lk_tensor *p = (*params)[i];
    if (p->dtype != LK_F64 && p->dtype != LK_F32)
      return lk_fail(host, LK_ECONFIG, "parameter %s: f64 or f32 only, not %s",
                     p->name, lk_dtype_name(p->dtype));
    *n += p->numel;
  }
  return rc;
}

/* Before such a step: a closure (WHO evaluates the model several times),
 * and the NP parameters of N elements it was created with. */
static inline int optim_flat_check(lk_host *host, const char *who,
                                   lk_tensor *const *params, size_t n_params,
                                   lk_closure_fn closure, size_t np, size_t n) {
  size_t total = 0;
  if (!closure)
    return lk_fail(host, LK_EINVAL,
                   "%s needs a closure: it evaluates the model several "
                   "times per step",
                   who);
  for (size_t i = 0; i < n_params; i++)
    total += params[i]->numel;
  if (n_params != np || total != n)
    return lk_fail(host, LK_ESTATE,
                   "called with %zu parameters (%zu elements), created with "
                   "%zu (%zu)",
                   n_params, total, np, n);
  return 0;
}

/* The parameters, or their gradients, concatenated into V. */
static inline void optim_gather(lk_tensor *const *p, size_t np, bool grad,
                                double *v) {
  for (size_t i = 0; i < np; i++) {
    const void *src = grad ? p[i]->grad : p[i]->data;
    for (size_t k = 0; k < p[i]->numel; k++)
      *v++ = p[i]->dtype == LK_F64 ? ((const double *)src)[k]
                                   : (double)((const float *)src)[k];
  }
}

/* V back into the parameters, rounded to each one's dtype. */
static inline void optim_scatter(lk_tensor *const *p, size_t np,
                                 const double *v) {
  for (size_t i = 0; i < np; i++)
    for (size_t k = 0; k < p[i]->numel; k++, v++)
      if (p[i]->dtype == LK_F64)
        ((double *)p[i]->data)[k] = *v;
      else
        ((float *)p[i]->data)[k] = (float)*v;
}

#if LK_ABI_MINOR >= 4
/* The momentum's range as the option tables write it: "[0, 1)". */
static inline const char *optim_momentum_range(const optim_common *c, char *buf,
                                               size_t len) {
  if (isinf(c->momentum_below))
    snprintf(buf, len, "[0, inf)");
  else
    snprintf(buf, len, "[0, %.17g)", c->momentum_below);
  return buf;
}

/* M is refused where create refuses its option's value (torch's check):
 * a scheduler that sets beta1 = 1 fails as a config with betas = 1,0.999
 * would, and a checkpoint that holds it is one no run can write. CODE:
 * LK_EINVAL for a value set, LK_EFORMAT for a checkpoint's. */
static inline int optim_check_momentum(const optim_common *c, double m,
                                       int code) {
  if (m >= 0 && m < c->momentum_below)
    return 0;
  char range[64];
  optim_momentum_range(c, range, sizeof range);
  if (code == LK_EFORMAT)
    return lk_fail(c->host, code,
                   "state %s[0] = %.17g: expected a number in %s (the range "
                   "of option %s.%s)",
                   c->momentum->name, m, range, lk_host_name(c->host),
                   c->momentum_option);
  return lk_fail(c->host, code,
                 "%s = %.17g: %s takes a %s in %s only (the range of its "
                 "option %s)",
                 c->momentum->name, m, lk_host_name(c->host),
                 strrchr(c->momentum->name, '.') + 1, range,
                 c->momentum_option);
}

/* set_momentum of an optimizer whose every value is usable as it is (the
 * adam family: beta1). */
static inline int optim_set_momentum(void *self, double momentum) {
  optim_common *c = self;
  int rc = optim_check_momentum(c, momentum, LK_EINVAL);
  if (rc == 0)
    *(double *)c->momentum->data = momentum;
  return rc;
}

/* set_momentum of an optimizer that keeps momentum buffers only when it
 * may need them (sgd, rmsprop: torch makes them at a step that has a
 * momentum): created with momentum = 0 it has none, unless a scheduler
 * drives the momentum. Such a scheduler sets it in its create, as torch's
 * OneCycleLR and CyclicLR do in their constructors, while the host still
 * takes state: MAKE then adds the buffers, and *KEPT records it, whatever
 * the value (a cycle may start at 0). Once the tables are sealed nothing
 * can be added: a momentum other than 0 is refused without buffers. */
static inline int optim_set_momentum_kept(optim_common *c, double momentum,
                                          bool *kept,
                                          int (*make)(optim_common *c)) {
  int rc = optim_check_momentum(c, momentum, LK_EINVAL);
  if (rc == 0 && !*kept) {
    rc = make(c);
    if (rc == 0)
      *kept = true;
    else if (rc == LK_ESTATE && momentum == 0)
      rc = 0; /* the run is set up: a momentum of 0 needs no buffers */
    else if (rc == LK_ESTATE)
      rc = lk_fail(c->host, LK_ECONFIG,
                   "momentum %g set while the run trains, but %s was "
                   "created with momentum = 0 and nothing set its momentum "
                   "while the run was set up, so it keeps no momentum "
                   "buffers: a scheduler that cycles the momentum sets it "
                   "in its create (as onecycle and cyclic do), or give %s "
                   "momentum > 0",
                   momentum, lk_host_name(c->host), lk_host_name(c->host));
  }
  if (rc == 0)
    *(double *)c->momentum->data = momentum;
  return rc;
}

/* For check_state, without buffers (created with momentum = 0, and no
 * scheduler drives the momentum): a momentum other than 0 is one no run of
 * this config can write. */
static inline int optim_check_no_buffers(const optim_common *c) {
  double m = optim_get_momentum((void *)c);
  if (m == 0)
    return 0;
  return lk_fail(c->host, LK_EFORMAT,
                 "state %s[0] = %g in the checkpoint, but %s was created "
                 "with momentum = 0 and no scheduler drives its momentum, "
                 "so it keeps no momentum buffers to step with: expected 0",
                 c->momentum->name, m, lk_host_name(c->host));
}

/* For check_state: momentum buffers that must still be as the host made
 * them (zero: BUF[i] of the C->n parameters), because FLAG (its name for
 * the messages) says no step has filled them yet. */
static inline int optim_check_unfilled(const optim_common *c,
                                       lk_tensor *const *buf,
                                       const lk_tensor *flag) {
  for (size_t i = 0; i < c->n; i++)
    for (size_t k = 0; k < buf[i]->numel; k++) {
      double v = buf[i]->dtype == LK_F64 ? ((const double *)buf[i]->data)[k]
                                         : ((const float *)buf[i]->data)[k];
      if (v != 0)
        return lk_fail(c->host, LK_EFORMAT,
                       "state %s[%zu] = %.17g, but %s[0] = 0 says no step "
                       "has made the momentum buffers yet: expected 0",
                       buf[i]->name, k, v, flag->name);
    }
  return 0;
}

/* For check_state: a rate >= 0, when kept, a whole step count, and a
 * momentum in its option's range (what set_momentum takes from a
 * scheduler, too). */
static inline int optim_check_state(const optim_common *c) {
  int rc = lk_state_check(c->host, c->lr, 0, DBL_MAX, false);
  if (rc == 0 && c->step)
    rc = lk_state_check(c->host, c->step, 0, LK_STATE_MAX_COUNT, true);
  if (rc == 0 && c->momentum)
    rc = optim_check_momentum(c, optim_get_momentum((void *)c), LK_EFORMAT);
  return rc;
}

/* For check_state: buffers that are never negative (sums and averages of
 * squares, whose square root the update takes). */
static inline int optim_check_squares(const optim_common *c,
                                      lk_tensor *const *buf) {
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < c->n; i++)
    rc = lk_state_check(c->host, buf[i], 0, DBL_MAX, false);
  return rc;
}
#endif

#endif
